"""MCP in the agent APIs, driven by the openai and anthropic SDKs against a real MCP server written with the SDK
(``tests/api/mcp/tool_server.py`` over streamable HTTP) and the bundled chat model, its calls forced with
``tool_choice``: the Responses ``mcp`` tool (``mcp_list_tools`` and ``mcp_call`` items, their stream events,
``require_approval`` with ``mcp_approval_request`` / ``mcp_approval_response``) and Anthropic's MCP connector
(``mcp_tool_use`` / ``mcp_tool_result`` blocks). The server's ``whoami`` tool answers its process id, which the
test knows, so an output that came from the tool is told from one the model made up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer, free_port, start_local_server

pytestmark = pytest.mark.slow

TOOL_SERVER = Path(__file__).parents[1] / "mcp" / "tool_server.py"
BETA = "mcp-client-2025-04-04"


class ToolServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(TOOL_SERVER), "http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the MCP tool server did not start")

    @property
    def pid(self) -> str:
        return str(self.process.pid)


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolServer]:
    server = ToolServer()
    yield server
    server.process.kill()
    server.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tools: ToolServer) -> Iterator[LocalServer]:
    """A server that lets requests name the tool server's URL (and no other), and has it configured as ``conf``."""
    home = tmp_path_factory.mktemp("agent-mcp")
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"conf": {"url": tools.url}}}))
    local = start_local_server(home, "--mcp-config", str(config), env={"XINFERENCE_MCP_ALLOWED_URLS": tools.url})
    try:
        launched = httpx.post(
            f"{local.api}/models", json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}, timeout=300
        )
        assert launched.status_code == 200, launched.text
        yield local
    finally:
        local.stop_and_reap()


@pytest.fixture(scope="module")
def client(server: LocalServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.api, api_key="none", max_retries=0, timeout=600)


def mcp_tool(tools: ToolServer, **extra: object) -> dict[str, object]:
    return {"type": "mcp", "server_label": "tools", "server_url": tools.url, **extra}


def forced(name: str) -> dict[str, str]:
    return {"type": "mcp", "server_label": "tools", "name": name}


def test_responses_mcp_call_returns_the_tools_output(client: openai.OpenAI, tools: ToolServer) -> None:
    response = client.responses.create(
        model=DEFAULT_MODEL,
        input="Which process are you talking to?",
        tools=[mcp_tool(tools, require_approval="never")],  # type: ignore[list-item]
        tool_choice=forced("whoami"),  # type: ignore[arg-type]
        max_output_tokens=32,
        temperature=0,
    )
    kinds = [item.type for item in response.output]
    assert kinds[:2] == ["mcp_list_tools", "mcp_call"] and kinds[-1] == "message", kinds
    listed = response.output[0]
    assert listed.server_label == "tools"  # type: ignore[union-attr]
    assert {"whoami", "add", "lookup_capital", "fail", "slow"} <= {t.name for t in listed.tools}  # type: ignore[union-attr]
    call = response.output[1]
    assert call.name == "whoami" and call.server_label == "tools" and call.status == "completed"  # type: ignore[union-attr]
    assert call.output == tools.pid and call.error is None  # type: ignore[union-attr]
    assert response.status in ("completed", "incomplete") and response.usage is not None
    assert response.usage.output_tokens > 0


def test_responses_stream_events_and_allowed_tools(client: openai.OpenAI, tools: ToolServer) -> None:
    with client.responses.stream(
        model=DEFAULT_MODEL,
        input="Which process are you talking to?",
        tools=[mcp_tool(tools, require_approval="never", allowed_tools=["whoami"])],  # type: ignore[list-item]
        tool_choice=forced("whoami"),  # type: ignore[arg-type]
        max_output_tokens=32,
        temperature=0,
    ) as stream:
        events = list(stream)
    kinds = [event.type for event in events]
    # the last event carries the whole response (response.incomplete when max_output_tokens cut the answer)
    final = events[-1].response  # type: ignore[union-attr]
    for kind in (
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ):
        assert kind in kinds, (kind, kinds)
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert kinds.index("response.mcp_call.completed") < kinds.index("response.output_text.delta")
    listed, call = final.output[0], final.output[1]
    assert [t.name for t in listed.tools] == ["whoami"]  # type: ignore[union-attr]
    assert call.type == "mcp_call" and call.output == tools.pid  # type: ignore[union-attr]


def test_responses_approval_request_then_approved_call(client: openai.OpenAI, tools: ToolServer) -> None:
    tool = mcp_tool(tools)  # require_approval defaults to "always", as at OpenAI
    asked = client.responses.create(
        model=DEFAULT_MODEL,
        input="Which process are you talking to?",
        tools=[tool],  # type: ignore[list-item]
        tool_choice=forced("whoami"),  # type: ignore[arg-type]
        max_output_tokens=32,
        temperature=0,
    )
    kinds = [item.type for item in asked.output]
    assert kinds == ["mcp_list_tools", "mcp_approval_request"], kinds
    request = asked.output[1]
    assert request.name == "whoami" and request.server_label == "tools"  # type: ignore[union-attr]
    approved = client.responses.create(
        model=DEFAULT_MODEL,
        previous_response_id=asked.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],  # type: ignore[list-item]
        tools=[tool],  # type: ignore[list-item]
        max_output_tokens=32,
        temperature=0,
    )
    kinds = [item.type for item in approved.output]
    assert kinds[0] == "mcp_call" and "mcp_list_tools" not in kinds, kinds  # listed once per conversation
    call = approved.output[0]
    assert call.approval_request_id == request.id and call.output == tools.pid  # type: ignore[union-attr]


def test_responses_configured_server_by_label(client: openai.OpenAI, tools: ToolServer) -> None:
    response = client.responses.create(
        model=DEFAULT_MODEL,
        input="Which process are you talking to?",
        tools=[{"type": "mcp", "server_label": "conf", "require_approval": "never"}],  # type: ignore[list-item]
        tool_choice={"type": "mcp", "server_label": "conf", "name": "whoami"},  # type: ignore[arg-type]
        max_output_tokens=16,
        temperature=0,
    )
    call = next(item for item in response.output if item.type == "mcp_call")
    assert call.server_label == "conf" and call.output == tools.pid  # type: ignore[union-attr]


def test_responses_tool_error_is_a_failed_call(client: openai.OpenAI, tools: ToolServer) -> None:
    response = client.responses.create(
        model=DEFAULT_MODEL,
        input="Try the tool.",
        tools=[mcp_tool(tools, require_approval="never", allowed_tools=["fail"])],  # type: ignore[list-item]
        tool_choice=forced("fail"),  # type: ignore[arg-type]
        max_output_tokens=64,  # room for the forced call's arguments: a call cut short is not run
        temperature=0,
    )
    call = next(item for item in response.output if item.type == "mcp_call")
    assert call.status == "failed" and call.output is None  # type: ignore[union-attr]
    error = call.model_dump()["error"]
    assert error is not None, call
    assert error["type"] == "mcp_tool_execution_error" and "fail" in error["content"][0]["text"]


def test_responses_refusals(server: LocalServer, tools: ToolServer) -> None:
    def post(body: dict[str, object]) -> httpx.Response:
        return httpx.post(f"{server.api}/responses", json={"model": DEFAULT_MODEL, "input": "hi", **body}, timeout=60)

    other = post({"tools": [{"type": "mcp", "server_label": "x", "server_url": "http://127.0.0.1:1/mcp"}]})
    assert other.status_code == 400 and other.json()["error"]["param"] == "tools[0].server_url"
    assert "XINFERENCE_MCP_ALLOWED_URLS" in other.json()["error"]["message"]
    unknown = post({"tools": [{"type": "mcp", "server_label": "nowhere"}]})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tools[0].server_label"
    connector = post({"tools": [{"type": "mcp", "server_label": "g", "connector_id": "connector_gmail"}]})
    assert connector.status_code == 400 and connector.json()["error"]["param"] == "tools[0].connector_id"
    bad_choice = post({"tools": [mcp_tool(tools)], "tool_choice": {"type": "mcp", "server_label": "other"}})
    assert bad_choice.status_code == 400 and bad_choice.json()["error"]["param"] == "tool_choice.server_label"
    stray = post(
        {
            "input": [{"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}],
            "tools": [mcp_tool(tools)],
        }
    )
    assert stray.status_code == 400 and "mcpr_x" in stray.json()["error"]["message"]


def test_anthropic_mcp_connector(server: LocalServer, tools: ToolServer) -> None:
    client = anthropic.Anthropic(base_url=server.endpoint, api_key="none", max_retries=0, timeout=600)
    servers = [{"type": "url", "url": tools.url, "name": "tools", "tool_configuration": {"allowed_tools": ["whoami"]}}]
    message = client.beta.messages.create(
        model=DEFAULT_MODEL,
        max_tokens=32,
        messages=[{"role": "user", "content": "Which process are you talking to?"}],
        mcp_servers=servers,  # type: ignore[arg-type]
        tool_choice={"type": "any"},
        extra_body={"temperature": 0},  # this SDK version takes sampling fields through extra_body
        betas=[BETA],
    )
    kinds = [block.type for block in message.content]
    assert kinds[:2] == ["mcp_tool_use", "mcp_tool_result"], kinds
    use, result = message.content[0], message.content[1]
    assert use.name == "whoami" and use.server_name == "tools" and use.input == {}  # type: ignore[union-attr]
    assert result.tool_use_id == use.id and result.is_error is False  # type: ignore[union-attr]
    assert result.content[0].text == tools.pid  # type: ignore[union-attr,index]
    assert message.stop_reason in ("end_turn", "max_tokens")

    with client.beta.messages.stream(
        model=DEFAULT_MODEL,
        max_tokens=32,
        messages=[{"role": "user", "content": "Which process are you talking to?"}],
        mcp_servers=servers,  # type: ignore[arg-type]
        tool_choice={"type": "tool", "name": "whoami"},
        extra_body={"temperature": 0},  # this SDK version takes sampling fields through extra_body
        betas=[BETA],
    ) as stream:
        final = stream.get_final_message()
    streamed = {block.type: block for block in final.content}
    assert streamed["mcp_tool_result"].content[0].text == tools.pid  # type: ignore[union-attr,index]

    follow_up = client.beta.messages.create(
        model=DEFAULT_MODEL,
        max_tokens=8,
        messages=[
            {"role": "user", "content": "Which process are you talking to?"},
            {"role": "assistant", "content": [b.model_dump() for b in message.content]},  # type: ignore[misc]
            {"role": "user", "content": "Thanks."},
        ],
        betas=[BETA],
    )
    assert follow_up.stop_reason in ("end_turn", "max_tokens")


def test_anthropic_url_not_allowed(server: LocalServer) -> None:
    body = {
        "model": DEFAULT_MODEL,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "mcp_servers": [{"type": "url", "url": "http://127.0.0.1:1/mcp", "name": "x"}],
    }
    refused = httpx.post(f"{server.endpoint}/v1/messages", json=body, timeout=60)
    assert refused.status_code == 400 and refused.json()["type"] == "error"
    assert "XINFERENCE_MCP_ALLOWED_URLS" in refused.json()["error"]["message"]
