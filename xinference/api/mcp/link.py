"""One live connection of the official ``mcp`` SDK's client to an MCP server (what :class:`~.manager.McpHub` and
:class:`~.manager.RemoteSession` hold).

Kept apart from :mod:`xinference.api.mcp.manager` so that the SDK (``mcp`` and ``mcp_types``, with httpx2 and the
protocol's pydantic models: ~0.4 s and ~23 MiB) is imported by the first connection to a server, not when the API
process starts: a platform without MCP servers never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from types import TracebackType
from typing import Any, AsyncIterator, Callable, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

from xinference.api.mcp.config import ServerConfig, StdioServerConfig
from xinference.api.mcp.results import ERROR_MAX, ToolInfo, ToolResult
from xinference.errors import McpError, McpTimeout

__all__ = ["CONNECT_TIMEOUT", "Link"]

#: how long connecting (start, handshake, tool listing) may take before the attempt counts as failed
CONNECT_TIMEOUT = 30.0


# -- the transport ----------------------------------------------------------------------------------------------
class _WatchedRead:
    """A transport's read stream that reports its end: the stdio server exited, or the HTTP stream closed."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read, write):
        yield _WatchedRead(read, on_end), write


class Link:
    """One client session, owned by a task of its own; ``ended`` is set when the connection is over for any reason
    (``stop()``, the server exited, the transport failed)."""

    def __init__(self, label: str, config: ServerConfig, errlog: TextIO | None) -> None:
        self.label = label
        self.config = config
        self._errlog = errlog
        self.client: Client | None = None
        self.tools: list[ToolInfo] = []
        self.ended = asyncio.Event()
        #: why the connection ended when nobody asked it to (None while it runs, or after ``stop()``)
        self.reason: str | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def open(self, timeout: float = CONNECT_TIMEOUT) -> None:
        """Connect and list the tools; raises McpError (with the cause) when that fails."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp {self.label}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except asyncio.TimeoutError:
            await self.stop()
            raise McpError(f"MCP server {self.label} did not finish connecting within {timeout:g}s") from None
        except BaseException:
            await self.stop()
            raise

    def _transport(self) -> Any:
        config = self.config
        if isinstance(config, StdioServerConfig):
            params = StdioServerParameters(
                command=config.command, args=list(config.args), env=config.env or None, cwd=config.cwd
            )
            transport = stdio_client(params, errlog=self._errlog) if self._errlog else stdio_client(params)
        else:
            http = create_mcp_http_client(headers=config.headers or None)
            transport = _with_client(http, streamable_http_client(config.url, http_client=http))
        return _watched(transport, self._lost)

    def _lost(self) -> None:
        if not self._stopping and self.reason is None:
            what = "exited" if isinstance(self.config, StdioServerConfig) else "closed the connection"
            self.reason = f"the server {what}"
        self._wake.set()

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with Client(self._transport(), cache=None) as client:
                self.client = client
                self.tools = await _list_tools(client)
                if not ready.done():
                    ready.set_result(None)
                await self._wake.wait()
        except BaseException as exc:  # noqa: BLE001 - every way out is reported, then the task ends
            if not ready.done():
                ready.set_exception(_as_mcp_error(self.label, exc))
            elif not self._stopping and self.reason is None:
                self.reason = _describe(exc)
            if isinstance(exc, asyncio.CancelledError) and not self._stopping:
                raise
        finally:
            self.client = None
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {self.label} closed while connecting"))
            self.ended.set()

    def fail(self, reason: str) -> None:
        """End the connection because a call found it broken; the supervisor reconnects."""
        if self.reason is None:
            self.reason = reason
        self._wake.set()

    async def stop(self, timeout: float = 10.0) -> None:
        """Close the session (a stdio server gets its stdin closed, then SIGTERM, then SIGKILL)."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:  # noqa: BLE001 - the task reported its own failure
            pass

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        client = self.client
        if client is None:
            raise McpError(f"MCP server {self.label} is not connected")
        try:
            # the SDK's own timeout makes it send a cancellation; the outer one is a backstop
            result = await asyncio.wait_for(
                client.call_tool(name, arguments, read_timeout_seconds=timeout), timeout + 2.0
            )
        except asyncio.TimeoutError:
            raise McpTimeout(f"MCP tool {name!r} of {self.label} did not answer within {timeout:g}s") from None
        except Exception as exc:  # noqa: BLE001 - the SDK raises its own errors and transport ones; see _call_error
            raise _call_error(self.label, name, exc, timeout) from exc
        return _tool_result(result)


@contextlib.asynccontextmanager
async def _with_client(http: Any, transport: Any) -> AsyncIterator[Any]:
    """The streamable HTTP transport over ``http`` (an httpx2 client carrying the headers), closing it after."""
    async with http:
        async with transport as streams:
            yield streams


async def _list_tools(client: Client) -> list[ToolInfo]:
    tools: list[ToolInfo] = []
    cursor: str | None = None
    for _ in range(100):  # pages; a server that never stops paginating is cut off
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            tools.append(ToolInfo(tool.name, tool.description, dict(tool.input_schema or {"type": "object"})))
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _tool_result(result: CallToolResult) -> ToolResult:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image {block.mime_type}]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            parts.append(resource.text if isinstance(resource, TextResourceContents) else f"[resource {resource.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    structured = result.structured_content
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return ToolResult("\n".join(parts), bool(result.is_error), structured)


def _describe(exc: BaseException) -> str:
    """A short reason for ``last_error``: the innermost errors of a task group, not its wrapper."""
    inner = getattr(exc, "exceptions", None)  # an exception group (Python 3.11+, or the backport anyio uses)
    while isinstance(inner, (list, tuple)) and inner and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    text = str(exc) or type(exc).__name__
    return text[:ERROR_MAX]


def _as_mcp_error(label: str, exc: BaseException) -> McpError:
    if isinstance(exc, McpError):
        return exc
    return McpError(f"cannot connect to MCP server {label}: {_describe(exc)}")


def _call_error(label: str, name: str, exc: BaseException, timeout: float) -> McpError:
    text = _describe(exc)
    if "timed out" in text.lower() or "timeout" in text.lower():
        return McpTimeout(f"MCP tool {name!r} of {label} did not answer within {timeout:g}s")
    return McpError(f"MCP tool {name!r} of {label} failed: {text}")
