"""MCP in the web UI, in a real headless Chromium against a real ``xinference-local`` started with ``--mcp-config``
(the SDK-written tool server over stdio, and a URL server nobody runs): the MCP page lists each server with its
status, last error and tools, adds a URL server and removes it; the chat page's switch sends ``mcp_servers`` and
shows each call the platform ran folded inside the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.mcp.servers import free_port, stdio_entry
from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from tests.ui.conftest import screenshot, watch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


#: the URL server the page adds: the one URL this server lets a runtime add reach (XINFERENCE_MCP_ALLOWED_URLS)
LATER_URL = f"http://127.0.0.1:{free_port()}/mcp"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("ui-mcp")
    config = home / "mcp.json"
    down = f"http://127.0.0.1:{free_port()}/mcp"
    config.write_text(json.dumps({"mcpServers": {"tools": stdio_entry(), "down": {"url": down}}}))
    local = start_local_server(home, "--mcp-config", str(config), env={"XINFERENCE_MCP_ALLOWED_URLS": LATER_URL})
    try:
        launch = {"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}
        response = httpx.post(f"{local.api}/models", json=launch, timeout=300)
        assert response.status_code == 200, response.text
        yield local
    finally:
        local.stop_and_reap()


def test_mcp_page_lists_servers_and_adds_one(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/mcp")
    tools = page.locator("tr[data-server=tools]")
    tools.locator("[data-status=ready]").wait_for()
    assert tools.locator("td").nth(1).inner_text() == "stdio"
    tools.locator("details[data-tool=whoami] summary").click()
    assert '"type": "object"' in tools.locator("details[data-tool=whoami] pre").inner_text()
    down = page.locator("tr[data-server=down]")
    down.locator("[data-status=failed]").wait_for()
    assert down.locator("[data-testid=mcp-error]").inner_text()  # why it failed

    page.fill("[data-testid=mcp-name]", "later")
    page.fill("[data-testid=mcp-url]", LATER_URL)
    page.click("[data-testid=mcp-add]")
    added = page.locator("tr[data-server=later]")
    added.wait_for()
    assert added.locator("td").nth(1).inner_text() == "http"
    screenshot(page, "mcp-page")
    added.get_by_role("button", name="Remove").click()
    added.wait_for(state="detached")
    names = {s["name"] for s in httpx.get(f"{server.api}/mcp/servers", timeout=10).json()["data"]}
    assert names == {"tools", "down"}


def test_chat_switch_sends_mcp_servers_and_folds_the_calls(page: Any, server: LocalServer) -> None:
    # A real stream of the platform with a call run on the tool server: the small model calls a tool only when
    # forced, which the chat page never does, so the page is answered with this stream while the request it sent
    # is checked.
    forced = {
        "model": DEFAULT_MODEL,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "mcp_servers": ["tools"],
        "tool_choice": {"type": "function", "function": {"name": "lookup_capital"}},
        "max_tokens": 64,
        "temperature": 0,
        "stream": True,
    }
    recorded = httpx.post(f"{server.api}/chat/completions", json=forced, timeout=600)
    assert recorded.status_code == 200, recorded.text
    chunks = [json.loads(line[6:]) for line in recorded.text.splitlines() if line.startswith("data: {")]
    ended = [c["mcp_call"] for c in chunks if "mcp_call" in c and c["mcp_call"]["status"] != "in_progress"]
    assert ended, recorded.text
    sent: list[dict[str, Any]] = []

    def answer(route: Any) -> None:
        sent.append(route.request.post_data_json)
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=recorded.text)

    problems = watch(page)
    page.route("**/v1/chat/completions", answer)
    page.goto(f"{server.endpoint}/ui/#/chat/{DEFAULT_MODEL}")
    switch = page.locator("[data-testid=mcp-switch]")
    # the switch is drawn once the chat page has rendered, enabled once the server list has come back
    page.wait_for_function(
        "() => { const s = document.querySelector('[data-testid=mcp-switch]'); return s && !s.disabled; }"
    )
    switch.check()
    page.fill("[data-testid=chat-input]", "What is the capital of France?")
    page.click("[data-testid=send]")
    page.locator("[data-role=assistant][data-done='1']").wait_for()
    assert sent and sent[0]["mcp_servers"] == "*"
    call = page.locator("[data-testid=mcp-call]").first
    assert call.get_attribute("data-status") == ended[0]["status"]
    assert call.get_attribute("open") is None  # folded until opened
    call.locator("summary").click()
    assert "lookup_capital" in call.locator("summary").inner_text()
    shown = call.locator("[data-testid=mcp-output], [data-testid=mcp-call-error]").inner_text()
    assert shown == (ended[0]["output"] if ended[0]["status"] == "completed" else ended[0]["error"])
    arguments = call.locator("[data-testid=mcp-arguments]").inner_text()
    try:
        assert json.loads(arguments) == json.loads(ended[0]["arguments"])  # shown indented
    except json.JSONDecodeError:
        assert arguments.strip() == ended[0]["arguments"].strip()  # arguments the model cut short: shown as sent
    screenshot(page, "mcp-chat")

    switch.uncheck()
    page.fill("[data-testid=chat-input]", "Thanks.")
    page.click("[data-testid=send]")
    page.locator("[data-role=assistant][data-done='1']").nth(1).wait_for()
    assert "mcp_servers" not in sent[1]
    assert problems.all() == []
