"""``xinference-local``: the API, the supervisor and one worker in one process; models in their subprocesses.

The same actors and calls as a cluster, with the supervisor and the worker sharing one xoscar main pool bound to
loopback. SIGINT/SIGTERM stop the HTTP server, terminate every model subprocess, then stop the pool: nothing is
left running.
"""

from __future__ import annotations

import logging
import time

import click
import xoscar as xo

from xinference import settings
from xinference.api.mcp.config import McpConfig
from xinference.core.refs import SupervisorRef, WorkerRef
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.deploy import event_loop, resume_gc
from xinference.deploy.bootstrap import MCP_CONFIG_HELP, create_pool, read_mcp_config, serve_api, stop_worker
from xinference.deploy.logs import setup_logging

__all__ = ["main", "run_local"]

logger = logging.getLogger("xinference.local")


async def run_local(
    host: str,
    port: int,
    log_level: str = "info",
    launch: tuple[str, ...] = (),
    internal_host: str = "127.0.0.1",
    mcp_config: McpConfig | None = None,
) -> None:
    """Start everything, serve until a signal, then shut everything down."""
    started = time.monotonic()
    pool = await create_pool(internal_host)
    address = pool.external_address
    worker: WorkerRef | None = None
    try:
        # autostart grace 0: this worker starts with the supervisor, so no worker can bring models back to adopt
        supervisor: SupervisorRef = await xo.create_actor(
            SupervisorActor, 0.0, address=address, uid=SupervisorActor.default_uid()
        )
        worker = await xo.create_actor(WorkerActor, pool, address, address=address, uid=WorkerActor.default_uid())
        _, serving = await serve_api(address, host, port, log_level, mcp_config)
        logger.info("Xinference ready at http://%s:%d in %.2fs", host, port, time.monotonic() - started)
        resume_gc()  # the collector waited while the platform loaded and started (see xinference.deploy)
        for name in launch:
            await _launch_default(supervisor, name)
        await serving
    finally:
        resume_gc()
        logger.info("shutting down")
        if worker is not None:
            await stop_worker(worker)
        await pool.stop()
        logger.info("stopped")


async def _launch_default(supervisor: SupervisorRef, model_name: str) -> None:
    started = time.monotonic()
    logger.info("launching %s ...", model_name)
    try:
        info = await supervisor.launch_model({"model_name": model_name})
    except Exception as exc:  # noqa: BLE001 - a failed auto-launch leaves the server up, with the reason logged
        logger.error("could not launch %s: %s", model_name, exc)
        return
    logger.info("model %s ready (%s) in %.2fs", info["model_uid"], info["model_engine"], time.monotonic() - started)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", "-H", default=settings.DEFAULT_HOST, show_default=True, help="Address the API binds to.")
@click.option("--port", "-p", default=settings.DEFAULT_PORT, show_default=True, type=int, help="API port.")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
)
@click.option("--launch", "launch", multiple=True, metavar="MODEL", help="Launch this model once ready (repeatable).")
@click.option("--mcp-config", envvar="XINFERENCE_MCP_CONFIG", default=None, metavar="FILE", help=MCP_CONFIG_HELP)
def main(host: str, port: int, log_level: str, launch: tuple[str, ...], mcp_config: str | None) -> None:
    """Run Xinference on this machine: API, supervisor and worker."""
    loop = event_loop.choose()  # a bad XINFERENCE_EVENT_LOOP stops here, before logs or pools
    mcp = read_mcp_config(mcp_config)
    setup_logging(log_level, settings.logs_dir() / "local.log")
    event_loop.run(run_local(host, port, log_level.lower(), launch, mcp_config=mcp), loop)


if __name__ == "__main__":
    main()
