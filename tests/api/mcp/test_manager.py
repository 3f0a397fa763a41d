"""The hub against real MCP servers: the SDK-written tool server over stdio and streamable HTTP, and the published
``mcp-server-time``. Covers listing and calling, a tool's own error, a timeout, a stdio server killed and started
again, an HTTP server that is down and then comes up, runtime add/remove, and request-named URLs."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from tests.api.mcp.servers import TIME_SERVER, free_port, http_tool_server, stdio_entry
from xinference.api.mcp.config import parse_config
from xinference.api.mcp.manager import McpHub
from xinference.errors import InvalidRequest, McpError, McpServerExists, McpServerNotFound, McpTimeout

FAST_BACKOFF = (0.2, 0.5)


def run_hub(servers: dict[str, Any], logs: Path, body: Callable[[McpHub], Awaitable[None]], **extra: Any) -> None:
    """Start a hub with ``servers``, run ``body`` with it, stop it."""

    async def main() -> None:
        hub = McpHub(parse_config({"mcpServers": servers, **extra}), logs_dir=logs, backoff=FAST_BACKOFF)
        await hub.start()
        try:
            await body(hub)
        finally:
            await hub.stop()
        assert {s["status"] for s in hub.describe()} <= {"stopped"}

    asyncio.run(main())


async def wait_status(hub: McpHub, name: str, status: str, timeout: float = 20.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        info = hub.describe_one(name)
        if info["status"] == status:
            return info
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{name} is {info['status']} ({info['last_error']}), not {status}")
        await asyncio.sleep(0.05)


def test_stdio_server_tools_errors_timeout_and_restart(tmp_path: Path) -> None:
    async def body(hub: McpHub) -> None:
        names = [tool.name for tool in await hub.list_tools("tools")]
        assert names == ["lookup_capital", "add", "fail", "slow", "whoami"]
        info = hub.describe_one("tools")
        assert info["status"] == "ready" and info["transport"] == "stdio" and info["last_error"] is None
        assert info["tools"][1]["input_schema"]["required"] == ["a", "b"]

        assert (await hub.call_tool("tools", "add", {"a": 2, "b": 40}, 10)).output == "42"
        assert (await hub.call_tool("tools", "lookup_capital", {"country": "Kenya"}, 10)).output == "Nairobi"
        failed = await hub.call_tool("tools", "fail", {}, 10)
        assert failed.is_error
        with pytest.raises(McpTimeout, match="did not answer within 1s"):
            await hub.call_tool("tools", "slow", {"seconds": 5}, 1)
        # a timed-out call leaves the server usable
        assert (await hub.call_tool("tools", "add", {"a": 1, "b": 1}, 10)).output == "2"

        pid = int((await hub.call_tool("tools", "whoami", {}, 10)).output)
        os.kill(pid, signal.SIGKILL)
        failed_info = await wait_status(hub, "tools", "failed")
        assert failed_info["last_error"] == "the server exited" and failed_info["tools"] == []
        await wait_status(hub, "tools", "ready")
        new_pid = int((await hub.call_tool("tools", "whoami", {}, 10)).output)
        assert new_pid != pid

    run_hub({"tools": stdio_entry()}, tmp_path, body)
    log = (tmp_path / "tools.log").read_text()
    assert log.count("starting") == 2  # the first start and the restart, stderr appended to one log


def test_unknown_server_and_a_command_that_does_not_exist(tmp_path: Path) -> None:
    async def body(hub: McpHub) -> None:
        with pytest.raises(McpServerNotFound, match="no MCP server named 'nope'"):
            await hub.list_tools("nope")
        info = await wait_status(hub, "broken", "failed")
        assert "No such file" in info["last_error"] or "not found" in info["last_error"].lower()
        with pytest.raises(McpError, match="'broken' is failed"):
            await hub.call_tool("broken", "x", {}, 5)

    run_hub({"broken": {"command": str(tmp_path / "no-such-command")}}, tmp_path, body)


def test_http_server_down_then_up(tmp_path: Path) -> None:
    port = free_port()

    async def body(hub: McpHub) -> None:
        info = await wait_status(hub, "remote", "failed")
        assert info["transport"] == "http" and info["last_error"]
        with http_tool_server(port):
            await wait_status(hub, "remote", "ready")
            assert (await hub.call_tool("remote", "add", {"a": 3, "b": 4}, 10)).output == "7"
            with pytest.raises(McpTimeout):
                await hub.call_tool("remote", "slow", {"seconds": 5}, 1)
        # the server is gone: the next call fails (never hangs) and the hub reconnects in the background
        with pytest.raises(McpError):
            await hub.call_tool("remote", "add", {"a": 1, "b": 2}, 5)
        await wait_status(hub, "remote", "failed")

    run_hub({"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}, tmp_path, body)


def test_runtime_add_and_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(hub: McpHub) -> None:
        with pytest.raises(InvalidRequest, match="only 'url' servers may be added at runtime"):
            await hub.add("local", stdio_entry())
        with http_tool_server() as url:
            monkeypatch.delenv("XINFERENCE_MCP_ALLOWED_URLS", raising=False)
            with pytest.raises(InvalidRequest, match="XINFERENCE_MCP_ALLOWED_URLS") as refused:
                await hub.add("remote", {"url": url})
            assert refused.value.param == "url" and hub.names() == []
            monkeypatch.setenv("XINFERENCE_MCP_ALLOWED_URLS", url)
            added = await hub.add("remote", {"url": url})
            assert added["name"] == "remote" and added["status"] == "starting"
            await wait_status(hub, "remote", "ready")
            with pytest.raises(McpServerExists):
                await hub.add("remote", {"url": url})
            await hub.remove("remote")
            assert hub.names() == []
            with pytest.raises(McpServerNotFound) as caught:
                await hub.remove("remote")
            assert caught.value.param == "name"

    run_hub({}, tmp_path, body)


def test_runtime_commands_when_the_config_allows_them(tmp_path: Path) -> None:
    async def body(hub: McpHub) -> None:
        await hub.add("local", stdio_entry())
        await wait_status(hub, "local", "ready")
        assert (await hub.call_tool("local", "add", {"a": 5, "b": 5}, 10)).output == "10"

    run_hub({}, tmp_path, body, allowRuntimeCommands=True)


def test_open_url_needs_an_allowed_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XINFERENCE_MCP_ALLOWED_URLS", raising=False)

    async def body(hub: McpHub) -> None:
        with http_tool_server() as url:
            with pytest.raises(InvalidRequest, match="not allowed"):
                await hub.open_url(url, {})
            monkeypatch.setenv("XINFERENCE_MCP_ALLOWED_URLS", url.rsplit("/", 1)[0])
            async with await hub.open_url(url, {"X-Test": "1"}) as session:
                assert "lookup_capital" in [tool.name for tool in await session.list_tools()]
                assert (await session.call_tool("lookup_capital", {"country": "peru"}, 10)).output == "Lima"

    run_hub({}, tmp_path, body)


@pytest.mark.skipif(not TIME_SERVER.exists(), reason="mcp-server-time is not installed (pyproject's dev extra)")
def test_published_time_server(tmp_path: Path) -> None:
    """``mcp-server-time`` from PyPI, started by the hub like any configured stdio server; it runs offline."""

    async def body(hub: McpHub) -> None:
        assert {tool.name for tool in await hub.list_tools("time")} == {"get_current_time", "convert_time"}
        result = await hub.call_tool(
            "time",
            "convert_time",
            {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            20,
        )
        assert not result.is_error
        assert result.structured is not None and result.structured["target"]["timezone"] == "Asia/Tokyo"
        assert result.structured["time_difference"] in ("+8.0h", "+7.0h")  # Paris in winter or in summer time

    run_hub({"time": {"command": str(TIME_SERVER), "args": ["--local-timezone", "UTC"]}}, tmp_path, body)
