"""Process bootstrap shared by ``xinference-local``, ``xinference-supervisor`` and ``xinference-worker``.

Each command is a composition of these pieces: an xoscar main pool, the supervisor and/or worker actors in it, the
HTTP API served by uvicorn on the same event loop, and an orderly shutdown on SIGINT/SIGTERM that stops every model
subprocess before the pool.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import uvicorn
import xoscar as xo

from xinference import settings
from xinference.api.app import create_app
from xinference.api.mcp.config import McpConfig, load_config
from xinference.core.refs import WorkerRef
from xinference.errors import InvalidRequest

__all__ = [
    "ApiServer",
    "MCP_CONFIG_HELP",
    "create_pool",
    "read_mcp_config",
    "serve_api",
    "stop_worker",
    "wait_for_signal",
]

logger = logging.getLogger("xinference.deploy")


class ApiServer(uvicorn.Server):
    """uvicorn, minus its habit of re-raising the signal after shutdown: we still have models to stop."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


async def create_pool(host: str, port: int = 0) -> Any:
    """An xoscar main pool bound to ``host:port`` (0: any free port). Its address is ``pool.external_address``.

    xoscar's own recovery of dead subprocesses is off: it would recreate a model actor without loading the model.
    The worker restarts dead replicas itself (see ``WorkerActor._recover``).
    """
    import xinference.core.xoscar_setup  # noqa: F401 - before the pool reloads xoscar's lazy handlers

    return await xo.create_actor_pool(f"{host}:{port}", n_process=0, auto_recover=False)


async def serve_api(
    supervisor_address: str, host: str, port: int, log_level: str, mcp_config: McpConfig | None = None
) -> tuple[ApiServer, asyncio.Task[None]]:
    """Start the HTTP API; returns once it listens (or raises why it could not, e.g. the port is taken)."""
    app = create_app(supervisor_address, settings.api_keys(), bound_host=host, mcp_config=mcp_config or McpConfig())
    server = ApiServer(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on"))
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if serving.done():
        await serving  # re-raises the start-up failure
        raise SystemExit(1)  # uvicorn reported the failure itself (e.g. the port is in use) and returned
    return server, serving


#: ``--mcp-config``'s help (xinference-local and xinference-supervisor)
MCP_CONFIG_HELP = (
    'JSON file of MCP servers ({"mcpServers": {name: {"command", "args", "env"} | {"url", "headers"}}}) that chat '
    "requests may use; also XINFERENCE_MCP_CONFIG. See doc/mcp.md."
)


def read_mcp_config(path: str | None) -> McpConfig:
    """The MCP config at ``path`` (``--mcp-config``), checked before anything starts: a mistake stops the command
    with a message naming the bad entry."""
    if not path:
        return McpConfig()
    try:
        return load_config(Path(path))
    except InvalidRequest as exc:
        raise click.UsageError(f"--mcp-config: {exc.message}") from None


async def wait_for_signal() -> int:
    """Block until SIGINT or SIGTERM; returns the signal number."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[int] = loop.create_future()

    def on_signal(sig: int) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await received
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def stop_worker(worker: WorkerRef) -> None:
    """Terminate every model subprocess of a worker (orderly shutdown)."""
    try:
        await asyncio.wait_for(worker.shutdown(), timeout=30)
    except Exception:  # noqa: BLE001 - shutting down: log and keep going
        logger.warning("some model processes did not stop cleanly", exc_info=True)
