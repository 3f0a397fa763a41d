"""The MCP servers the platform uses: started, supervised, connected to, and called.

:class:`McpHub` runs in the API process (``xinference-local``, ``xinference-supervisor``). For each configured
server it keeps one live client session of the official ``mcp`` SDK:

- a stdio server (``command``) is started as a child process in its own process group, its stderr appended to
  ``XINFERENCE_HOME/logs/mcp/<name>.log``; when it exits it is started again after a backoff (1 s, doubling to
  30 s, back to 1 s once a start served 30 s), and it is stopped with the platform;
- an HTTP server (``url``) is connected to with the SDK's streamable HTTP client; a failed connection, or a call
  that fails for transport reasons, is retried with the same backoff.

Each server has a status (``starting``, ``ready``, ``failed``, ``stopped``), its last error and its tools, listed
once per connection. ``call_tool`` runs one tool with a timeout; a tool that reports an error returns it as a
:class:`ToolResult` with ``is_error`` set, while an unreachable server or a timeout raises
:class:`~xinference.errors.McpError` / :class:`~xinference.errors.McpTimeout`.

Request-named servers (the Responses ``mcp`` tool, Anthropic's ``mcp_servers``) are opened with :meth:`McpHub.open_url`,
which refuses a URL the operator did not allow (``XINFERENCE_MCP_ALLOWED_URLS``, :func:`url_allowed`). A request can
never start a command.

Why a task per connection: the SDK's client is an anyio context whose cancel scopes must be entered and left by the
same task, while calls come from many request tasks; the owning task enters it, waits, and leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Literal, TextIO
from urllib.parse import urlsplit

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

from xinference import settings
from xinference.api.mcp.config import (
    HttpServerConfig,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    check_server_name,
    parse_server,
)
from xinference.errors import InvalidRequest, McpError, McpServerExists, McpServerNotFound, McpTimeout

__all__ = [
    "McpHub",
    "RemoteSession",
    "ServerStatus",
    "ToolInfo",
    "ToolResult",
    "check_url_allowed",
    "url_allowed",
]

logger = logging.getLogger(__name__)

ServerStatus = Literal["starting", "ready", "failed", "stopped"]

#: seconds before the first restart of a server that died or could not be reached, doubling up to the second value
BACKOFF = (1.0, 30.0)
#: a start that served this long resets the backoff
_STABLE_SECONDS = 30.0
#: how long a call naming a server that is still starting waits for it
_READY_WAIT = 15.0
#: how long connecting (start, handshake, tool listing) may take before the attempt counts as failed
_CONNECT_TIMEOUT = 30.0
#: longest error text kept as ``last_error``
_ERROR_MAX = 500


@dataclass(frozen=True)
class ToolInfo:
    """One tool of a server, as ``tools/list`` gave it."""

    name: str
    description: str | None
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned: its content as text (``output``) and whether the tool reported an error."""

    output: str
    is_error: bool = False
    structured: dict[str, Any] | None = None


# -- which URLs a request may name ------------------------------------------------------------------------------------
def url_allowed(url: str, prefixes: tuple[str, ...] | None = None) -> bool:
    """Whether a request may make the platform reach ``url`` (``prefixes``: ``XINFERENCE_MCP_ALLOWED_URLS``).

    A prefix matches on whole parts: the same scheme, host and port, and a path that equals the prefix's path or
    continues it after a ``/`` (``http://h:8000/mcp`` allows ``http://h:8000/mcp`` and ``http://h:8000/mcp/x``,
    never ``http://h:8000/mcpx`` nor ``http://h:8000.evil.example/``)."""
    prefixes = settings.mcp_allowed_urls() if prefixes is None else prefixes
    target = _url_parts(url)
    if target is None:
        return False
    for prefix in prefixes:
        allowed = _url_parts(prefix)
        if allowed is None or allowed[:3] != target[:3]:
            continue
        base, path = allowed[3].rstrip("/"), target[3]
        if not base or path == base or path.startswith(base + "/"):
            return True
    return False


def check_url_allowed(url: str, param: str) -> None:
    """Refuse (400 naming ``param``) a request-named URL the operator did not allow."""
    if not url_allowed(url):
        raise InvalidRequest(
            f"the MCP server URL {url[:200]!r} is not allowed here: the operator lists the URLs requests may name in "
            "XINFERENCE_MCP_ALLOWED_URLS; use a configured server instead",
            param=param,
        )


def _url_parts(url: str) -> tuple[str, str, int, str] | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname.lower(), port or default, parts.path or "/"


# -- one live connection ----------------------------------------------------------------------------------------------
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


class _Link:
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

    async def open(self, timeout: float = _CONNECT_TIMEOUT) -> None:
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
    return text[:_ERROR_MAX]


def _as_mcp_error(label: str, exc: BaseException) -> McpError:
    if isinstance(exc, McpError):
        return exc
    return McpError(f"cannot connect to MCP server {label}: {_describe(exc)}")


def _call_error(label: str, name: str, exc: BaseException, timeout: float) -> McpError:
    text = _describe(exc)
    if "timed out" in text.lower() or "timeout" in text.lower():
        return McpTimeout(f"MCP tool {name!r} of {label} did not answer within {timeout:g}s")
    return McpError(f"MCP tool {name!r} of {label} failed: {text}")


# -- the servers the platform supervises ------------------------------------------------------------------------------
@dataclass
class _Server:
    name: str
    config: ServerConfig
    status: ServerStatus = "starting"
    last_error: str | None = None
    link: _Link | None = None
    task: asyncio.Task[None] | None = None
    #: set while the server is not ``starting`` (ready, failed or stopped): what a call waiting for it waits on
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    #: how many times it was (re)started, and whether it came from the config file or ``POST /v1/mcp/servers``
    starts: int = 0
    added_at_runtime: bool = False

    def describe(self) -> dict[str, Any]:
        link = self.link
        tools = link.tools if link is not None and self.status == "ready" else []
        return {
            "name": self.name,
            "transport": self.config.transport,
            "status": self.status,
            "last_error": self.last_error,
            "tools": [tool.to_dict() for tool in tools],
        }


class McpHub:
    """Every configured MCP server, supervised for the API process's lifetime (``start()`` in the app's lifespan,
    ``stop()`` at its end)."""

    def __init__(
        self,
        config: McpConfig | None = None,
        *,
        logs_dir: Path | None = None,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self._config = config or McpConfig()
        self._logs_dir = logs_dir
        self._backoff = backoff
        self._servers: dict[str, _Server] = {}
        self._started = False

    @property
    def allow_runtime_commands(self) -> bool:
        return self._config.allow_runtime_commands

    async def start(self) -> None:
        """Start every configured server (returns at once: each connects in the background)."""
        self._started = True
        for name, config in self._config.servers.items():
            self._launch(name, config)

    async def stop(self) -> None:
        """Stop every server (stdio processes end) and wait for them."""
        self._started = False
        await asyncio.gather(*(self._halt(server) for server in list(self._servers.values())))

    def names(self) -> list[str]:
        return list(self._servers)

    def describe(self) -> list[dict[str, Any]]:
        """``GET /v1/mcp/servers``'s ``data``."""
        return [server.describe() for server in self._servers.values()]

    def describe_one(self, name: str) -> dict[str, Any]:
        return self._get(name).describe()

    async def add(self, name: str, entry: object, *, from_request: bool = True) -> dict[str, Any]:
        """Add and start a server. From a request: a URL server only where ``XINFERENCE_MCP_ALLOWED_URLS`` allows its
        URL, a stdio server only where the config allowed commands (``allowRuntimeCommands``, which trusts both)."""
        check_server_name(name, "name")
        config = parse_server(entry, "server")
        if isinstance(config, StdioServerConfig) and from_request and not self.allow_runtime_commands:
            raise InvalidRequest(
                "only 'url' servers may be added at runtime; stdio servers ('command') come from the MCP config "
                'file, unless it sets "allowRuntimeCommands": true',
                param="command",
            )
        if isinstance(config, HttpServerConfig) and from_request and not self.allow_runtime_commands:
            check_url_allowed(config.url, "url")  # an API call may not make the platform reach any host it names
        if name in self._servers:
            raise McpServerExists(f"an MCP server named {name!r} exists already; remove it first", param="name")
        server = self._launch(name, config)
        server.added_at_runtime = from_request
        return server.describe()

    async def remove(self, name: str) -> None:
        server = self._get(name, param="name")
        del self._servers[name]
        await self._halt(server)

    async def wait_ready(self, name: str, timeout: float = _READY_WAIT) -> None:
        """Wait until ``name`` is ready; McpError with its last error when it is not within ``timeout``."""
        server = self._get(name)
        if server.status == "starting":  # a failed one waits for its backoff: no use waiting for it here
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.settled.wait(), timeout)
        if server.status != "ready" or server.link is None:
            why = f": {server.last_error}" if server.last_error else ""
            raise McpError(f"MCP server {name!r} is {server.status}{why}")

    async def list_tools(self, server: str) -> list[ToolInfo]:
        """The tools of ``server`` (waits a little for one still starting)."""
        await self.wait_ready(server)
        link = self._servers[server].link
        return list(link.tools) if link is not None else []

    async def call_tool(
        self, server: str, name: str, arguments: dict[str, Any], timeout: float | None = None
    ) -> ToolResult:
        """Call one tool; McpTimeout past ``timeout`` (default ``XINFERENCE_MCP_CALL_TIMEOUT``), McpError when the
        server is not there or the call failed for reasons other than the tool's own error."""
        await self.wait_ready(server)
        entry = self._servers[server]
        link = entry.link
        if link is None:
            raise McpError(f"MCP server {server!r} is {entry.status}")
        try:
            return await link.call(name, arguments, timeout or settings.mcp_call_timeout())
        except McpTimeout:
            raise
        except McpError as exc:
            if link.ended.is_set() or _transport_failed(exc):
                link.fail(exc.message)  # reconnect in the background
            raise

    async def open_url(
        self, url: str, headers: dict[str, str] | None = None, *, param: str = "server_url"
    ) -> RemoteSession:
        """A session with a request-named server (checked against ``XINFERENCE_MCP_ALLOWED_URLS``); close it with
        ``aclose()`` or use it as ``async with``."""
        check_url_allowed(url, param)
        session = RemoteSession(url, HttpServerConfig(url, dict(headers or {})))
        await session.connect()
        return session

    # -- supervision -------------------------------------------------------------------------------------------
    def _get(self, name: str, param: str = "mcp_servers") -> _Server:
        server = self._servers.get(name)
        if server is None:
            known = ", ".join(self._servers) or "none"
            raise McpServerNotFound(f"no MCP server named {name[:80]!r} (configured: {known})", param=param)
        return server

    def _launch(self, name: str, config: ServerConfig) -> _Server:
        server = _Server(name, config)
        self._servers[name] = server
        server.task = asyncio.create_task(self._supervise(server), name=f"mcp supervisor {name}")
        return server

    async def _halt(self, server: _Server) -> None:
        server.stopping = True
        if server.link is not None:
            await server.link.stop()
        if server.task is not None and not server.task.done():
            server.task.cancel()
            with contextlib.suppress(BaseException):
                await server.task
        server.status = "stopped"
        server.settled.set()

    async def _supervise(self, server: _Server) -> None:
        delay = self._backoff[0]
        while not server.stopping:
            started = time.monotonic()
            server.status, server.starts = "starting", server.starts + 1
            server.settled.clear()
            with self._errlog(server) as errlog:
                link = _Link(repr(server.name), server.config, errlog)
                try:
                    await link.open()
                except McpError as exc:
                    server.status, server.last_error = "failed", exc.message[:_ERROR_MAX]
                    server.settled.set()
                    logger.warning("MCP server %s: %s", server.name, exc.message)
                else:
                    server.link, server.status = link, "ready"
                    server.settled.set()
                    logger.info("MCP server %s ready with %d tools", server.name, len(link.tools))
                    await link.ended.wait()
                    server.link = None
                    if server.stopping:
                        break
                    server.status = "failed"
                    server.last_error = (link.reason or "the connection ended")[:_ERROR_MAX]
                    logger.warning("MCP server %s: %s; restarting", server.name, server.last_error)
            if time.monotonic() - started >= _STABLE_SECONDS:
                delay = self._backoff[0]
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    @contextlib.contextmanager
    def _errlog(self, server: _Server) -> Any:
        if not isinstance(server.config, StdioServerConfig):
            yield None
            return
        folder = self._logs_dir or settings.mcp_logs_dir()
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{server.name}.log", "a", encoding="utf-8") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {server.config.command}\n")
            log.flush()
            yield log


def _transport_failed(exc: McpError) -> bool:
    text = exc.message.lower()
    return any(word in text for word in ("connect", "closed", "broken", "reset", "refused"))


class RemoteSession:
    """A session with one request-named MCP server (from :meth:`McpHub.open_url`): the same two calls as the hub's,
    for one request's lifetime."""

    def __init__(self, label: str, config: HttpServerConfig) -> None:
        self._link = _Link(label, config, None)

    async def connect(self) -> None:
        await self._link.open()

    async def list_tools(self) -> list[ToolInfo]:
        return list(self._link.tools)

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
        return await self._link.call(name, arguments, timeout or settings.mcp_call_timeout())

    async def aclose(self) -> None:
        await self._link.stop()

    async def __aenter__(self) -> RemoteSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
