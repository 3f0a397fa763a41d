"""MCP through a real ``xinference-local`` started with ``--mcp-config`` and the bundled SmolLM2 on llama.cpp.

The config names the SDK-written tool server over stdio (``tools``) and an HTTP server nobody runs (``down``). The
model is launched with ``mcp_servers: ["tools"]``, so requests without tools of their own get its tools too. A
forced ``tool_choice`` makes the small model call the tool for sure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from openai import OpenAI

from tests.api.mcp.servers import free_port, http_tool_server, stdio_entry
from tests.api.openapi_schema import assert_matches_openapi
from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server

#: each test makes a few model turns; on a loaded 2-core CI host one turn has taken a minute
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

UID = "smol-mcp"
FORCE_CAPITAL = {"type": "function", "function": {"name": "lookup_capital"}}
#: the one URL the server lets ``POST /v1/mcp/servers`` add (XINFERENCE_MCP_ALLOWED_URLS)
RUNTIME_PORT = free_port()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("mcp-home")
    config = home / "mcp.json"
    down = f"http://127.0.0.1:{free_port()}/mcp"
    config.write_text(json.dumps({"mcpServers": {"tools": stdio_entry(), "down": {"url": down}}}))
    env = {"XINFERENCE_MCP_CALL_TIMEOUT": "3", "XINFERENCE_MCP_ALLOWED_URLS": f"http://127.0.0.1:{RUNTIME_PORT}/mcp"}
    local = start_local_server(home, "--mcp-config", str(config), env=env)
    try:
        launch = {"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp", "model_uid": UID, "mcp_servers": ["tools"]}
        response = httpx.post(f"{local.api}/models", json=launch, timeout=180)
        assert response.status_code == 200, response.text
        yield local
    finally:
        local.stop_and_reap()


def servers(server: LocalServer) -> dict[str, dict[str, Any]]:
    body = httpx.get(f"{server.api}/mcp/servers", timeout=10).json()
    return {entry["name"]: entry for entry in body["data"]}


def wait_for(server: LocalServer, name: str, status: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        entry = servers(server).get(name)
        if entry is not None and entry["status"] == status:
            return entry
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: {entry}")
        time.sleep(0.1)


def chat(server: LocalServer, **body: Any) -> httpx.Response:
    payload = {"model": UID, "temperature": 0, "max_tokens": 40, **body}
    return httpx.post(f"{server.api}/chat/completions", json=payload, timeout=600)


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def test_servers_are_listed_with_status_and_tools(server: LocalServer) -> None:
    tools = wait_for(server, "tools", "ready")
    assert tools["transport"] == "stdio" and tools["last_error"] is None
    assert [t["name"] for t in tools["tools"]] == ["lookup_capital", "add", "fail", "slow", "whoami"]
    down = wait_for(server, "down", "failed")
    assert down["transport"] == "http" and down["last_error"] and down["tools"] == []
    body = httpx.get(f"{server.api}/mcp/servers", timeout=10).json()
    assert body["object"] == "list"
    assert_matches_openapi(server.endpoint, "GET", "/v1/mcp/servers", body)
    logs = server.home / "logs" / "mcp" / "tools.log"
    assert logs.exists()


def test_forced_mcp_call_is_run_and_answered(server: LocalServer) -> None:
    wait_for(server, "tools", "ready")
    response = chat(
        server, messages=ask("What is the capital of France?"), mcp_servers=["tools"], tool_choice=FORCE_CAPITAL
    )
    assert response.status_code == 200, response.text
    body = response.json()
    (call,) = body["mcp_calls"]
    assert call["server"] == "tools" and call["name"] == "lookup_capital"
    assert json.loads(call["arguments"])["country"].lower() == "france"
    assert call["output"] == "Paris" and call["status"] == "completed" and call["error"] is None
    message = body["choices"][0]["message"]
    assert "Paris" in message["content"] and not message.get("tool_calls")
    assert body["choices"][0]["finish_reason"] == "stop"
    assert_matches_openapi(server.endpoint, "POST", "/v1/chat/completions", body)


def test_the_openai_sdk_gets_mcp_calls_through_extra_body(server: LocalServer) -> None:
    client = OpenAI(base_url=server.api, api_key="none")
    completion = client.chat.completions.create(
        model=UID,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        tool_choice={"type": "function", "function": {"name": "lookup_capital"}},
        extra_body={"mcp_servers": ["tools"]},
        temperature=0,
        max_tokens=40,
        timeout=600,
    )
    calls = (completion.model_extra or {})["mcp_calls"]
    assert calls[0]["output"] == "Paris"
    assert "Paris" in (completion.choices[0].message.content or "")


def test_streamed_calls_appear_as_they_start_and_end(server: LocalServer) -> None:
    payload = {
        "model": UID,
        "messages": ask("What is the capital of France?"),
        "mcp_servers": "*",
        "tool_choice": FORCE_CAPITAL,
        "stream": True,
        "temperature": 0,
        "max_tokens": 40,
    }
    chunks = []
    with httpx.stream("POST", f"{server.api}/chat/completions", json=payload, timeout=600) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    assert not any("error" in c for c in chunks), chunks
    calls = [c["mcp_call"] for c in chunks if "mcp_call" in c]
    assert [c["status"] for c in calls] == ["in_progress", "completed"]
    assert calls[0]["id"] == calls[1]["id"] and calls[1]["output"] == "Paris"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip()
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_the_launch_option_gives_requests_without_tools_the_servers(server: LocalServer) -> None:
    response = chat(server, messages=ask("What is the capital of Kenya?"), tool_choice=FORCE_CAPITAL)
    assert response.status_code == 200, response.text
    assert response.json()["mcp_calls"][0]["output"] == "Nairobi"
    described = httpx.get(f"{server.api}/models/{UID}", timeout=10).json()
    assert described["mcp_servers"] == ["tools"]
    # a request with tools of its own keeps them only: its forced call comes back to the client
    own = [{"type": "function", "function": {"name": "lookup_capital", "parameters": {"type": "object"}}}]
    response = chat(server, messages=ask("Capital of Kenya?"), tools=own, tool_choice=FORCE_CAPITAL)
    body = response.json()
    assert "mcp_calls" not in body and body["choices"][0]["message"]["tool_calls"]


def test_tool_error_is_handed_to_the_model(server: LocalServer) -> None:
    force_fail = {"type": "function", "function": {"name": "fail"}}
    response = chat(server, messages=ask("Try the fail tool."), mcp_servers=["tools"], tool_choice=force_fail)
    assert response.status_code == 200, response.text
    body = response.json()
    (call,) = body["mcp_calls"]
    assert call["status"] == "failed" and call["error"] and call["output"] is None
    assert body["choices"][0]["finish_reason"] in ("stop", "length")  # the model answered (briefly or not)
    assert not body["choices"][0]["message"].get("tool_calls")


def test_round_limit(server: LocalServer) -> None:
    response = chat(
        server, messages=ask("Add 2 and 3."), mcp_servers=["tools"], tool_choice="required", max_tool_rounds=1
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["mcp_calls"]) == 1
    assert not body["choices"][0]["message"].get("tool_calls")


def test_request_errors(server: LocalServer) -> None:
    down = chat(server, messages=ask("hi"), mcp_servers=["down"])
    assert down.status_code == 502, down.text
    error = down.json()["error"]
    assert error["code"] == "mcp_error" and "'down' is failed" in error["message"]
    unknown = chat(server, messages=ask("hi"), mcp_servers=["nope"])
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "mcp_servers"
    bad = chat(server, messages=ask("hi"), mcp_servers=["bad name"])
    assert bad.status_code == 400
    rounds = chat(server, messages=ask("hi"), mcp_servers=["tools"], max_tool_rounds=0)
    assert rounds.status_code == 400
    launch = httpx.post(f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "mcp_servers": "tools"}, timeout=30)
    assert launch.status_code == 400 and "mcp_servers" in launch.text
    launch = httpx.post(f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "mcp_servers": ["nope"]}, timeout=30)
    assert launch.status_code == 404 and launch.json()["error"]["param"] == "mcp_servers"


def test_add_and_remove_servers_at_runtime(server: LocalServer) -> None:
    refused = httpx.post(f"{server.api}/mcp/servers", json={"name": "sneaky", **stdio_entry()}, timeout=10)
    assert refused.status_code == 400 and "only 'url' servers" in refused.json()["error"]["message"]
    elsewhere = httpx.post(f"{server.api}/mcp/servers", json={"name": "far", "url": "http://10.0.0.1/mcp"}, timeout=10)
    assert elsewhere.status_code == 400 and elsewhere.json()["error"]["param"] == "url"
    with http_tool_server(RUNTIME_PORT) as url:
        added = httpx.post(f"{server.api}/mcp/servers", json={"name": "remote", "url": url}, timeout=10)
        assert added.status_code == 200, added.text
        wait_for(server, "remote", "ready")
        dup = httpx.post(f"{server.api}/mcp/servers", json={"name": "remote", "url": url}, timeout=10)
        assert dup.status_code == 409
        assert "add" in [tool["name"] for tool in servers(server)["remote"]["tools"]]
        assert httpx.delete(f"{server.api}/mcp/servers/remote", timeout=10).status_code == 204
    assert "remote" not in servers(server)
    assert httpx.delete(f"{server.api}/mcp/servers/remote", timeout=10).status_code == 404
    bad = httpx.post(f"{server.api}/mcp/servers", json={"name": "x", "url": "ftp://h/"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "server.url"


def test_a_killed_stdio_server_is_started_again(server: LocalServer) -> None:
    wait_for(server, "tools", "ready")
    (first,) = _tool_processes(server)
    first.kill()
    failed = wait_for(server, "tools", "failed")
    assert failed["last_error"] == "the server exited"
    wait_for(server, "tools", "ready")
    (second,) = _tool_processes(server)
    assert second.pid != first.pid


def test_stopping_the_platform_stops_its_stdio_servers(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"tools": stdio_entry()}}))
    local = start_local_server(tmp_path, "--mcp-config", str(config))
    try:
        wait_for(local, "tools", "ready")
        (child,) = _tool_processes(local)
    finally:
        local.stop_and_reap()
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_a_bad_config_stops_the_command(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"x": {"command": "a", "url": "http://h/"}}}))
    with pytest.raises(RuntimeError, match="mcpServers.x needs exactly one of"):
        start_local_server(tmp_path, "--mcp-config", str(config), ready_timeout=30)


def _tool_processes(server: LocalServer) -> list[psutil.Process]:
    found = []
    for proc in server.descendants():
        try:
            if any(part.endswith("tool_server.py") for part in proc.cmdline()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found
