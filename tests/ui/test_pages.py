"""The other pages in a real browser: a failed launch's message, the chat's "view code" (run for real), the
embeddings try-out, the Register page (template preview, field errors, a registration that reaches the
catalog), the Logs and Cluster pages. One ``xinference-local`` for the module, hub access off (offline)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from tests.ui.conftest import screenshot, watch

pytestmark = pytest.mark.slow

EMBEDDING = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("ui-pages-home")
    server = start_local_server(home, env={"HF_HUB_OFFLINE": "1"})
    try:
        yield server
    finally:
        server.stop_and_reap()


def test_a_failed_launch_shows_its_full_message(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.fill("[data-testid=model-search]", "smollm2-instruct")
    page.locator(".model-card").first.get_by_role("button", name="Launch").click()
    page.locator("label.engine[data-engine=Transformers] input").check()  # weights on the hub: offline here
    page.fill("#uid", "offline-try")
    page.click("[data-testid=launch-button]")
    box = page.locator("[data-testid=launch-progress] .error-box, .modal .error-box").first
    box.wait_for(timeout=120_000)
    shown = box.inner_text()
    listed = httpx.get(f"{server.api}/models", timeout=10).json()["data"]
    if listed:  # the launch was accepted and failed in the background: the page shows the event's whole text
        events = httpx.get(f"{server.api}/models/offline-try/events", timeout=10).json()["events"]
        failed = [e["message"] for e in events if e["event"] == "launch_failed"]
        assert failed and shown == failed[-1]
        page.locator("[data-testid=launch-progress] .badge[data-status=failed]").wait_for()
        screenshot(page, "launch-failed")
        # A reload loses nothing: the Running page shows the failure too.
        page.goto(f"{server.endpoint}/ui/#/running")
        failure = page.locator("tr[data-uid=offline-try] [data-testid=failure]")
        failure.wait_for()
        assert failure.inner_text() == failed[-1].splitlines()[0][:160]
        assert httpx.delete(f"{server.api}/models/offline-try", timeout=30).status_code == 200
    else:  # refused up front (memory, engine): the 4xx's message
        assert shown.strip()


def test_the_launch_page_lists_models_that_run_offline_first(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.locator(".model-card").first.wait_for()
    bundled = page.locator(".model-card").evaluate_all("cards => cards.map(c => c.dataset.bundled)")
    first_other = bundled.index("no")
    assert first_other > 0 and "yes" not in bundled[first_other:], bundled
    names = page.locator(".model-card").evaluate_all("cards => cards.map(c => c.dataset.model)")
    assert DEFAULT_MODEL in names[:first_other] and len(names) > 100
    first = page.locator(".model-card").first
    assert first.locator(".badge", has_text="bundled").count() + first.locator(".badge", has_text="cached").count()


def test_a_memory_refusal_is_shown_in_the_dialog(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.fill("[data-testid=model-search]", "smollm2-instruct")
    page.locator(".model-card").first.get_by_role("button", name="Launch").click()
    page.locator("details.engine-options summary").click()
    page.fill("#opt-n_ctx", "2097152")  # a 2M-token KV cache: tens of GiB
    page.fill("#uid", "too-big")
    page.click("[data-testid=launch-button]")
    box = page.locator(".modal .error-box")
    box.wait_for()
    text = box.inner_text()
    assert re.search(r"needs ~[\d.]+ GiB, worker has [\d.]+ GiB free", text), text
    assert "ignore_memory_check" in text
    assert all(m["model_uid"] != "too-big" for m in httpx.get(f"{server.api}/models", timeout=10).json()["data"])


def test_chat_view_code_runs_as_shown(page: Any, server: LocalServer) -> None:
    response = httpx.post(
        f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}, timeout=180
    )
    assert response.status_code == 200, response.text
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/chat/{DEFAULT_MODEL}")
    page.fill("[data-testid=system-prompt]", "Answer in one word.")
    page.fill("[data-testid=temperature]", "0")
    page.fill("[data-testid=max-tokens]", "8")
    page.fill("[data-testid=chat-input]", "Name a colour.")
    page.click("[data-testid=view-code]")
    panel = page.locator("[data-testid=code-panel]")
    curl = panel.locator("pre").inner_text()
    assert curl.startswith(f"curl {server.endpoint}/v1/chat/completions")
    result = subprocess.run(
        ["bash", "-c", curl.replace("$XINFERENCE_API_KEY", "none") + " --no-buffer -sS"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("data: [DONE]")
    panel.get_by_role("button", name="OpenAI SDK").click()
    openai_code = panel.locator("pre").inner_text()
    assert '"Name a colour."' in openai_code and "temperature=0" in openai_code and "max_tokens=8" in openai_code
    panel.get_by_role("button", name="Python client").click()
    client_code = panel.locator("pre").inner_text()
    run = subprocess.run([sys.executable, "-c", client_code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    assert problems.all() == []


def test_running_page_adds_and_removes_a_replica(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/running")
    row = page.locator(f"tr[data-uid='{DEFAULT_MODEL}']")
    row.locator(".badge[data-status=ready]").wait_for()
    row.get_by_role("button", name="+ replica").click()
    row.get_by_text("2/2").wait_for(timeout=120_000)
    described = httpx.get(f"{server.api}/models/{DEFAULT_MODEL}", timeout=10).json()
    assert [r["replica_uid"] for r in described["replicas"]] == [f"{DEFAULT_MODEL}-0", f"{DEFAULT_MODEL}-1"]
    row.get_by_role("button", name="− replica").click()
    row.get_by_text("1/1").wait_for(timeout=60_000)
    described = httpx.get(f"{server.api}/models/{DEFAULT_MODEL}", timeout=10).json()
    assert [r["replica_uid"] for r in described["replicas"]] == [f"{DEFAULT_MODEL}-0"]
    assert problems.all() == []


def test_embeddings_try_out(page: Any, server: LocalServer) -> None:
    response = httpx.post(
        f"{server.api}/models", json={"model_name": EMBEDDING, "model_type": "embedding"}, timeout=180
    )
    assert response.status_code == 200, response.text
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/try/{EMBEDDING}")
    page.get_by_role("button", name="Embed").click()
    matrix = page.locator("table.matrix")
    matrix.wait_for(timeout=60_000)
    cells = [[float(c) for c in row.locator("td").all_inner_texts()] for row in matrix.locator("tbody tr").all()]
    assert len(cells) == 3 and all(abs(cells[i][i] - 1) < 1e-3 for i in range(3))
    # The two sentences about cats are closer to each other than to the one about markets.
    assert cells[0][1] > cells[0][2] and cells[0][1] > cells[1][2]
    screenshot(page, "try-embeddings")
    assert problems.all() == []


def test_register_page_previews_validates_and_registers(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/register")
    preview = page.locator("[data-testid=template-preview]")
    preview.wait_for()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=template-preview]').textContent.includes('Italy')"
    )
    assert "<|user|>\nWhat is the capital of France?" in preview.inner_text()
    # A template the sandbox refuses shows the server's message.
    page.locator("textarea.mono").fill("{{ messages.__class__ }}")
    page.locator(".register-page .error-box").wait_for()
    page.locator("textarea.mono").fill("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=template-preview]')?.textContent || '')"
        ".startsWith('system: You are')"
    )
    # A field the form checks itself.
    name = page.locator(".register-page input").nth(0)
    name.fill("bad name!")
    page.locator("[data-field=model_name]").wait_for()
    assert page.get_by_role("button", name="Register").is_disabled()
    name.fill("my-ui-model")
    shown = json.loads(page.locator("[data-testid=register-json]").inner_text())
    assert shown["model"]["model_name"] == "my-ui-model"
    # The default weights path does not exist: the server's 400 names the field, and the page shows it there.
    page.get_by_role("button", name="Register").click()
    page.locator("[data-field=model_uri]").wait_for()
    assert "exist" in page.locator("[data-field=model_uri]").inner_text()
    weights = server.home / "my-ui-model.gguf"
    weights.write_bytes(b"GGUF")
    page.get_by_label("Local weights (file:///...)").fill(f"file://{weights}")
    page.locator("[data-field=model_uri]").wait_for(state="detached")  # an edit drops the server's old error
    page.get_by_role("button", name="Register").click()
    page.locator(".register-page [role=status]").wait_for()
    registered = httpx.get(f"{server.api}/model_registrations/LLM/my-ui-model", timeout=10)
    assert registered.status_code == 200
    assert registered.json()["chat_template"].startswith("{% for m in messages %}")
    # A second registration of the same name: the server's error is shown.
    page.get_by_role("button", name="Register").click()
    page.locator(".register-page .error-box").wait_for()
    # It is in the catalog, found by the "custom" filter.
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.get_by_label("custom").check()
    page.locator(".model-card[data-model=my-ui-model]").wait_for()
    assert page.locator(".model-card").count() == 1


def test_logs_and_cluster_pages(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/logs/{DEFAULT_MODEL}")
    log = page.locator("[data-testid=log]")
    page.wait_for_function("() => document.querySelector('[data-testid=log]')?.textContent.includes('loaded with')")
    assert str(server.home) not in log.inner_text()
    # Followed live: what the replica writes next appears without a reload.
    before = httpx.get(f"{server.api}/models/{DEFAULT_MODEL}/logs", timeout=10).json()
    shown = log.inner_text().count("\n")
    chat = httpx.post(
        f"{server.api}/chat/completions",
        timeout=60,
        json={"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
    )
    assert chat.status_code == 200
    deadline = time.monotonic() + 60  # a condition, polled; the bound only ends a test that would hang
    while httpx.get(f"{server.api}/models/{DEFAULT_MODEL}/logs", timeout=10).json()["size"] == before["size"]:
        assert time.monotonic() < deadline, "the replica wrote nothing for a request"
        time.sleep(0.3)
    page.wait_for_function(
        f"() => document.querySelector('[data-testid=log]').textContent.split('\\n').length > {shown + 1}",
        timeout=10_000,
    )
    page.goto(f"{server.endpoint}/ui/#/cluster")
    worker = page.locator(".worker").first
    worker.wait_for()
    assert DEFAULT_MODEL in worker.inner_text() and EMBEDDING in worker.inner_text()
    assert problems.all() == []


# A scripted stream stands in for a reasoning model (none runs offline on this machine): the page's rendering of
# reasoning, markdown and code blocks is what is under test, not the model.
SCRIPTED_STREAM = (
    "".join(
        f"data: {json.dumps(chunk)}\n\n"
        for chunk in [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "The user wants "}}]},
            {"choices": [{"index": 0, "delta": {"reasoning_content": "a function."}}]},
            {"choices": [{"index": 0, "delta": {"content": "Here:\n\n```python\ndef add(a, b):\n"}}]},
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "    return a + b\n```\n\n**Done** <script>x()</script>"},
                        "finish_reason": "stop",
                    }
                ]
            },
            {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}},
        ]
    )
    + "data: [DONE]\n\n"
)


def test_chat_shows_reasoning_apart_and_renders_markdown(page: Any, server: LocalServer) -> None:
    page.route(
        "**/v1/chat/completions",
        lambda route: route.fulfill(status=200, body=SCRIPTED_STREAM, headers={"Content-Type": "text/event-stream"}),
    )
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/chat/{DEFAULT_MODEL}")
    page.fill("[data-testid=chat-input]", "Write add() in Python.")
    page.click("[data-testid=send]")
    answer = page.locator(".msg.assistant").last
    answer.and_(page.locator("[data-done='1']")).wait_for()
    assert answer.locator(".reasoning-text").text_content() == "The user wants a function."  # folded once answered
    bubble = answer.locator("[data-testid=answer]")
    assert bubble.locator("pre code").inner_text().startswith("def add(a, b):")
    assert bubble.locator("strong").inner_text() == "Done"
    assert bubble.locator("script").count() == 0
    stats = answer.locator("[data-testid=msg-stats]").inner_text()
    assert "12 prompt + 30 completion tokens" in stats and "5 chunks" in stats and "finish: stop" in stats
    screenshot(page, "chat-reasoning")
    # Regenerate sends the same conversation again and replaces the answer.
    page.get_by_role("button", name="Regenerate").click()
    page.locator(".msg.assistant").last.and_(page.locator("[data-done='1']")).wait_for()
    assert page.locator(".msg.user").count() == 1 and page.locator(".msg.assistant").count() == 1
    assert problems.all() == []


# Scripted answers stand in for a rerank model (none is installed offline): the page's request and its ranked
# rendering are under test.
def test_rerank_try_out_ranks_documents(page: Any, server: LocalServer) -> None:
    fake_model = {
        "model_uid": "scripted-reranker",
        "model_name": "scripted-reranker",
        "model_type": "rerank",
        "model_ability": ["rerank"],
        "status": "ready",
        "replicas": [],
        "replica": 1,
    }
    sent: list[dict[str, Any]] = []

    def models(route: Any) -> None:
        route.fulfill(json={"object": "list", "data": [fake_model]})

    def rerank(route: Any) -> None:
        body = json.loads(route.request.post_data or "{}")
        sent.append(body)
        scores = [0.1, 0.9, 0.4][: len(body["documents"])]
        ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
        route.fulfill(json={"id": "r", "results": [{"index": i, "relevance_score": scores[i]} for i in ranked]})

    page.route("**/v1/models", models)
    page.route("**/v1/rerank", rerank)
    page.goto(f"{server.endpoint}/ui/#/try/scripted-reranker")
    page.get_by_label("Query").fill("What do cats like?")
    page.get_by_role("button", name="Rank").click()
    items = page.locator("ol.ranked li")
    items.first.wait_for()
    assert sent[0]["model"] == "scripted-reranker" and sent[0]["query"] == "What do cats like?"
    texts = items.all_inner_texts()
    assert texts[0].startswith("0.9000") and sent[0]["documents"][1] in texts[0]
    assert [t.split()[0] for t in texts] == ["0.9000", "0.4000", "0.1000"]
