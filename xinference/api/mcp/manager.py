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

The connection itself is :class:`~xinference.api.mcp.link.Link`: this module does not import the SDK, which loads
(in a worker thread, so the event loop keeps serving) when the first server connects. A platform without MCP servers
never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO
from urllib.parse import urlsplit

from xinference import settings
from xinference.api.mcp.config import (
    HttpServerConfig,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    check_server_name,
    parse_server,
)
from xinference.api.mcp.results import ERROR_MAX, ToolInfo, ToolResult
from xinference.errors import InvalidRequest, McpError, McpServerExists, McpServerNotFound, McpTimeout

if TYPE_CHECKING:  # the SDK (``mcp``, ~0.4 s and ~23 MiB) loads with the first connection: see link.py
    from xinference.api.mcp.link import Link

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


# -- the servers the platform supervises ------------------------------------------------------------------------------
@dataclass
class _Server:
    name: str
    config: ServerConfig
    status: ServerStatus = "starting"
    last_error: str | None = None
    link: Link | None = None
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
        await load_sdk()
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
            await load_sdk()
            with self._errlog(server) as errlog:
                link = _new_link(repr(server.name), server.config, errlog)
                try:
                    await link.open()
                except McpError as exc:
                    server.status, server.last_error = "failed", exc.message[:ERROR_MAX]
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
                    server.last_error = (link.reason or "the connection ended")[:ERROR_MAX]
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


_LINK_MODULE = "xinference.api.mcp.link"


async def load_sdk() -> None:
    """Import the SDK's client (:mod:`.link`) off the event loop: the first time it takes ~0.4 s of CPU."""
    if _LINK_MODULE not in sys.modules:
        await asyncio.to_thread(importlib.import_module, _LINK_MODULE)


def _new_link(label: str, config: ServerConfig, errlog: TextIO | None) -> Link:
    """A connection of the SDK's client (not opened yet)."""
    from xinference.api.mcp.link import Link

    return Link(label, config, errlog)


def _transport_failed(exc: McpError) -> bool:
    text = exc.message.lower()
    return any(word in text for word in ("connect", "closed", "broken", "reset", "refused"))


class RemoteSession:
    """A session with one request-named MCP server (from :meth:`McpHub.open_url`): the same two calls as the hub's,
    for one request's lifetime."""

    def __init__(self, label: str, config: HttpServerConfig) -> None:
        self._link = _new_link(label, config, None)

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
