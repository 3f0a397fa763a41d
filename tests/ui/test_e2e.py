"""The web UI end to end, in a real headless Chromium against a real ``xinference-local`` (nothing launched).

Launch the bundled model from the Launch page, watch it become ready, chat with it (streamed, incremental),
stop a long generation and check the engine slot is free again, terminate it from the page; a model launched
through the API shows up without a reload; every page in light and dark, without a console error or a failed
request, screenshotted under tests/ui/artifacts/.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer
from tests.ui.conftest import VIEWPORT, browser_page, screenshot, watch

pytestmark = pytest.mark.slow

PAGES = [
    "launch",
    "running",
    f"chat/{DEFAULT_MODEL}",
    "try",
    "audio",
    "images",
    "register",
    "cluster",
    f"logs/{DEFAULT_MODEL}",
]

# Record every distinct text the last answer shows while it streams (to see it render incrementally).
OBSERVE_ANSWER = """() => {
  window.__answerStates = [];
  const box = document.querySelector('[data-testid=messages]');
  new MutationObserver(() => {
    const answers = box.querySelectorAll('[data-testid=answer]');
    const text = answers.length ? answers[answers.length - 1].textContent : '';
    const states = window.__answerStates;
    if (text && states[states.length - 1] !== text) states.push(text);
  }).observe(box, { subtree: true, childList: true, characterData: true });
}"""


@pytest.fixture(scope="module")
def page(browser: Any, ui_server: LocalServer) -> Iterator[Any]:
    with browser_page(browser) as shared:
        yield shared


def _last_answer(page: Any) -> Any:
    return page.locator(".msg.assistant").last


def _timed_chat(server: LocalServer, max_tokens: int) -> float:
    """Seconds a non-streamed chat request of exactly ``max_tokens`` generated tokens takes."""
    started = time.monotonic()
    response = httpx.post(
        f"{server.api}/chat/completions",
        timeout=600,
        json={
            "model": DEFAULT_MODEL,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
        },
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == max_tokens
    return elapsed


def _send(page: Any, text: str) -> None:
    page.fill("[data-testid=chat-input]", text)
    page.click("[data-testid=send]")


def test_launch_chat_stop_and_terminate_from_the_page(page: Any, ui_server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{ui_server.endpoint}/")  # redirects to /ui/
    assert page.url.endswith("/ui/")
    page.fill("[data-testid=model-search]", "smollm2-instruct")
    cards = page.locator(".model-card")
    cards.first.wait_for()
    assert cards.count() == 1
    cards.first.get_by_role("button", name="Launch").click()

    # Every engine is listed; vLLM cannot run here and says why.
    vllm = page.locator("label.engine[data-engine=vLLM]")
    vllm.wait_for()
    assert "disabled" in (vllm.get_attribute("class") or "")
    assert page.locator("label.engine[data-engine=vLLM] input").is_disabled()
    reason = httpx.get(f"{ui_server.api}/engines/LLM/{DEFAULT_MODEL}", timeout=30).json()["vLLM"]
    assert isinstance(reason, str) and vllm.locator(".reason").inner_text() == reason
    assert page.locator("label.engine[data-engine='llama.cpp'] input").is_checked()
    assert page.locator("#quant").input_value() == "Q4_1"  # the bundled weights come first
    # One slot, so the stop test below can see whether the stopped request still holds it.
    page.locator("details.engine-options summary").click()
    page.fill("#opt-n_parallel", "1")
    command = page.locator("[data-testid=cli-command]").inner_text()
    assert command == (
        "xinference launch -n smollm2-instruct -en llama.cpp -f ggufv2 -s 0_135 -q Q4_1 "
        f"--n_parallel 1 -e {ui_server.endpoint}"
    )
    page.click("[data-testid=launch-button]")
    progress = page.locator("[data-testid=launch-progress]")
    progress.wait_for()
    progress.locator(".badge[data-status=ready]").wait_for(timeout=180_000)
    described = httpx.get(f"{ui_server.api}/models/{DEFAULT_MODEL}", timeout=10).json()
    assert described["status"] == "ready" and described["engine_config"].get("n_parallel") == 1

    # Chat at temperature 0 with a system prompt; the answer arrives in several chunks and renders as it comes.
    page.get_by_role("link", name="Chat with it").click()
    page.wait_for_url("**/#/chat/smollm2-instruct")
    page.fill("[data-testid=system-prompt]", "You are a geography assistant. Answer in one short sentence.")
    page.fill("[data-testid=temperature]", "0")
    page.fill("[data-testid=max-tokens]", "48")
    page.evaluate(OBSERVE_ANSWER)
    _send(page, "What is the capital of France?")
    answer = _last_answer(page)
    answer.and_(page.locator("[data-done='1']")).wait_for(timeout=120_000)
    text = answer.locator("[data-testid=answer]").inner_text()
    assert "Paris" in text
    chunks = int(answer.get_attribute("data-chunks") or 0)
    states = page.evaluate("window.__answerStates")
    assert chunks >= 2, f"the page received {chunks} chunk(s)"
    assert len(states) >= 2, f"the answer did not render incrementally: {states}"
    stats = answer.locator("[data-testid=msg-stats]").inner_text()
    assert "first token" in stats and "completion tokens" in stats
    print(f"\nanswer {text!r}: {chunks} chunks, {len(states)} rendered states; {stats}")

    # Stop a long generation: the page aborts the request, and the engine's only slot is free again at once.
    page.fill("[data-testid=max-tokens]", "6000")
    _send(page, "Count from 1 to 5000, one number per line.")
    page.wait_for_function(
        "() => { const a = document.querySelectorAll('.msg.assistant'); "
        "return a.length && Number(a[a.length - 1].dataset.chunks) >= 5; }",
        timeout=120_000,
    )
    in_flight = httpx.get(f"{ui_server.api}/models", timeout=10).json()["data"][0]["requests_in_flight"]
    assert in_flight == 1
    page.click("[data-testid=stop]")
    _last_answer(page).and_(page.locator("[data-done='1']")).wait_for(timeout=10_000)
    assert "stopped" in _last_answer(page).locator("[data-testid=msg-stats]").inner_text()
    deadline = time.monotonic() + 60  # a condition, polled; the bound only ends a test that would hang
    while httpx.get(f"{ui_server.api}/models", timeout=10).json()["data"][0]["requests_in_flight"]:
        assert time.monotonic() < deadline, "the stopped stream is still counted in flight"
        time.sleep(0.2)
    # Were the stopped stream still decoding in the only slot, a fresh 4-token request would queue behind its
    # ~6000 steps. The bound is in decoding steps, from a 64-step request timed right after (by then the slot is
    # free either way), not in seconds: a busy machine slows both alike.
    waited = _timed_chat(ui_server, 4)
    step = _timed_chat(ui_server, 64) / 64
    assert waited < 500 * step, (
        f"a fresh request waited {waited:.1f}s ({waited / step:.0f} decoding steps): "
        "the stopped stream still holds the only slot"
    )

    # Terminate from the Running page; the API agrees.
    page.goto(f"{ui_server.endpoint}/ui/#/running")
    row = page.locator(f"tr[data-uid='{DEFAULT_MODEL}']")
    row.locator("[data-testid=terminate]").click()
    row.locator("[data-testid=terminate-confirm]").click()
    page.locator("[data-testid=no-models]").wait_for(timeout=60_000)
    assert httpx.get(f"{ui_server.api}/models", timeout=10).json()["data"] == []
    assert problems.all() == []


def test_a_model_launched_through_the_api_appears_without_a_reload(page: Any, ui_server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{ui_server.endpoint}/ui/#/running")
    page.locator("[data-testid=no-models]").wait_for()
    page.evaluate("window.__sameDocument = true")
    response = httpx.post(
        f"{ui_server.api}/models", timeout=180, json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}
    )
    assert response.status_code == 200, response.text
    page.locator(f"tr[data-uid='{DEFAULT_MODEL}'] .badge[data-status=ready]").wait_for(timeout=10_000)
    assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    assert problems.all() == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_renders_without_errors(browser: Any, ui_server: LocalServer, theme: str) -> None:
    # Runs after the previous test, with the model it launched still running (so Chat and Logs have content).
    context = browser.new_context(viewport=VIEWPORT, color_scheme=theme)
    try:
        page = context.new_page()
        problems = watch(page)
        for name in PAGES:
            page.goto(f"{ui_server.endpoint}/ui/#/{name}")
            page.locator("main .page").wait_for()
            page.wait_for_load_state("networkidle")
            assert page.evaluate("document.documentElement.dataset.theme") == theme
            screenshot(page, f"{name.split('/')[0]}-{theme}")
            assert problems.all() == [], f"page {name}: {problems.all()}"
        # The theme toggle switches and is remembered.
        page.click("[data-testid=theme-toggle]")
        other = "dark" if theme == "light" else "light"
        page.wait_for_function(f"() => document.documentElement.dataset.theme === '{other}'", timeout=5_000)
        page.reload()
        page.locator("main .page").wait_for()
        assert page.evaluate("document.documentElement.dataset.theme") == other  # remembered
        # A narrow window: the sidebar becomes a bar on top and the chat still fits.
        page.set_viewport_size({"width": 420, "height": 860})
        page.goto(f"{ui_server.endpoint}/ui/#/chat/{DEFAULT_MODEL}")
        page.locator("[data-testid=chat-input]").wait_for()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        screenshot(page, f"chat-narrow-{other}")
        assert page.locator("[data-testid=version]").inner_text().startswith("v")
    finally:
        context.close()


def test_logs_endpoint_is_bounded_and_follows(ui_server: LocalServer) -> None:
    log = httpx.get(f"{ui_server.api}/models/{DEFAULT_MODEL}/logs", params={"tail": 5}, timeout=10)
    assert log.status_code == 200, log.text
    body = log.json()
    assert body["replica_uid"] == f"{DEFAULT_MODEL}-0" and len(body["lines"]) <= 5 and body["size"] > 0
    assert not any(str(ui_server.home) in line for line in body["lines"])
    again = httpx.get(f"{ui_server.api}/models/{DEFAULT_MODEL}/logs", params={"since": body["offset"]}, timeout=10)
    assert again.json()["offset"] >= body["offset"]
    assert httpx.get(f"{ui_server.api}/models/nope/logs", timeout=10).status_code == 404
    assert (
        httpx.get(f"{ui_server.api}/models/{DEFAULT_MODEL}/logs", params={"replica": "7"}, timeout=10).status_code
        == 404
    )
    assert (
        httpx.get(f"{ui_server.api}/models/{DEFAULT_MODEL}/logs", params={"tail": 10**6}, timeout=10).status_code == 400
    )
    assert httpx.delete(f"{ui_server.api}/models/{DEFAULT_MODEL}", timeout=60).status_code == 200
