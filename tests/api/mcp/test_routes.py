"""``/v1/mcp/servers`` and the chat fields on the session's shared server, which runs no MCP server."""

from __future__ import annotations

import httpx

from tests.api.mcp.servers import stdio_entry
from tests.api.openapi_schema import assert_matches_openapi


def test_no_servers_configured(endpoint: str, model_uid: str) -> None:
    body = httpx.get(f"{endpoint}/v1/mcp/servers", timeout=10).json()
    # nothing configured (the API fuzzer, on the same server, may have added a URL server in the meantime)
    assert body["object"] == "list" and all(entry["transport"] == "http" for entry in body["data"])
    assert_matches_openapi(endpoint, "GET", "/v1/mcp/servers", body)
    named = httpx.post(
        f"{endpoint}/v1/chat/completions",
        json={"model": model_uid, "messages": [{"role": "user", "content": "hi"}], "mcp_servers": ["search"]},
        timeout=30,
    )
    assert named.status_code == 404
    assert named.json()["error"]["code"] == "mcp_server_not_found" and named.json()["error"]["param"] == "mcp_servers"
    # "*" with no server ready is a plain chat
    every = httpx.post(
        f"{endpoint}/v1/chat/completions",
        json={"model": model_uid, "messages": [{"role": "user", "content": "hi"}], "mcp_servers": "*", "max_tokens": 4},
        timeout=120,
    )
    assert every.status_code == 200, every.text
    assert "mcp_calls" not in every.json()


def test_bad_requests(endpoint: str, model_uid: str) -> None:
    servers = f"{endpoint}/v1/mcp/servers"
    refused = httpx.post(servers, json={"name": "local", **stdio_entry()}, timeout=10)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "command"
    for body, param in [
        ({"name": "x", "url": "ftp://host/"}, "server.url"),
        ({"name": "x"}, "server"),
        ({"name": "bad name", "url": "http://127.0.0.1:1/mcp"}, "name"),
        ({"name": "x", "url": "http://127.0.0.1:1/mcp", "token": "t"}, "server.token"),
    ]:
        response = httpx.post(servers, json=body, timeout=10)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == param
    assert httpx.post(servers, json={"url": "http://127.0.0.1:1/mcp"}, timeout=10).status_code == 400
    missing = httpx.delete(f"{servers}/nope", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "name"
    chat = f"{endpoint}/v1/chat/completions"
    messages = [{"role": "user", "content": "hi"}]
    for extra in ({"mcp_servers": "all"}, {"mcp_servers": ["a b"]}, {"max_tool_rounds": 0}, {"max_tool_rounds": 65}):
        response = httpx.post(chat, json={"model": model_uid, "messages": messages, **extra}, timeout=10)
        assert response.status_code == 400, (extra, response.text)
    names = [entry["name"] for entry in httpx.get(servers, timeout=10).json()["data"]]
    assert "local" not in names and "bad name" not in names
