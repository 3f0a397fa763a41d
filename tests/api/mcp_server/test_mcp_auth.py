"""``/mcp`` sits behind the same API keys and Host checks as every route: the SDK's client is refused with a wrong
key and served with a right one (also through ``xinference mcp --api-key``); a foreign Host or a cross-site POST is
refused before the MCP server sees it. A server without models: authentication comes first."""

from __future__ import annotations

import asyncio
import sys

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.conftest import start_local_server

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _leaves(exc: BaseException) -> list[BaseException]:
    nested = getattr(exc, "exceptions", None)
    return [leaf for inner in nested for leaf in _leaves(inner)] if nested else [exc]


async def _tools_with_key(url: str, key: str) -> set[str]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            return {tool.name for tool in (await client.list_tools()).tools}


def test_keys_and_host_checks_apply_to_mcp(tmp_path) -> None:
    server = start_local_server(tmp_path, env={"XINFERENCE_API_KEYS": "key-one"})
    url = f"{server.endpoint}/mcp"
    try:
        refused = httpx.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
        wrong = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        with pytest.raises(Exception) as caught:  # the SDK's transport error, inside its task groups' groups
            asyncio.run(_tools_with_key(url, "nope"))
        assert any(isinstance(e, MCPError) and "error response" in str(e) for e in _leaves(caught.value))
        assert "chat" in asyncio.run(_tools_with_key(url, "key-one"))
        served = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "x-api-key": "key-one"})
        assert served.status_code == 200, served.text

        keyed = {**MCP_HEADERS, "Authorization": "Bearer key-one"}
        foreign_host = httpx.post(url, json=INITIALIZE, headers={**keyed, "Host": "evil.example"})
        assert foreign_host.status_code == 403 and foreign_host.json()["error"]["code"] == "host_not_allowed"
        cross_site = httpx.post(url, json=INITIALIZE, headers={**keyed, "Origin": "http://evil.example"})
        assert cross_site.status_code == 403 and cross_site.json()["error"]["code"] == "origin_not_allowed"

        async def over_stdio(key: str) -> tuple[bool, str]:
            args = ["-m", "xinference.cli", "mcp", "-e", server.endpoint, "--api-key", key]
            async with Client(StdioServerParameters(command=sys.executable, args=args)) as client:
                result = await client.call_tool("list_models", {})
                block = result.content[0]
                assert isinstance(block, TextContent)
                return result.is_error, block.text

        assert asyncio.run(over_stdio("key-one")) == (False, '{"models": []}')
        failed, message = asyncio.run(over_stdio("nope"))
        assert failed and "API key" in message
    finally:
        server.stop()
