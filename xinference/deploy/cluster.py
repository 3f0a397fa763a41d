"""``xinference-supervisor`` and ``xinference-worker``: the multi-node deployment.

The supervisor process runs the API and the SupervisorActor; each worker process runs a WorkerActor that finds
the supervisor through ``GET /v1/address``, registers with its hardware, and heartbeats. Stopping the supervisor
leaves the models running on their workers: they re-register when it comes back. Stopping a worker stops its
models.

The internal actor ports carry pickled messages: bind them (``--host``) to a private network, never the internet.
"""

from __future__ import annotations

import logging

import click
import httpx
import xoscar as xo

from xinference import settings
from xinference.api.mcp.config import McpConfig
from xinference.core.refs import WorkerRef
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.deploy import event_loop
from xinference.deploy.bootstrap import (
    MCP_CONFIG_HELP,
    create_pool,
    read_mcp_config,
    serve_api,
    stop_worker,
    wait_for_signal,
)
from xinference.deploy.logs import setup_logging

__all__ = ["discover_supervisor", "supervisor_main", "worker_main"]

logger = logging.getLogger("xinference.cluster")

_LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)


async def run_supervisor(
    host: str, port: int, supervisor_port: int, log_level: str, mcp_config: McpConfig | None = None
) -> None:
    pool = await create_pool(host, supervisor_port)
    try:
        await xo.create_actor(SupervisorActor, address=pool.external_address, uid=SupervisorActor.default_uid())
        _, serving = await serve_api(pool.external_address, host, port, log_level, mcp_config)
        logger.info("supervisor at %s, API at http://%s:%d", pool.external_address, host, port)
        await serving
    finally:
        await pool.stop()
        logger.info("supervisor stopped")


def discover_supervisor(endpoint: str, api_key: str | None = None, timeout: float = 10) -> str:
    """The supervisor's internal actor address, asked from its HTTP API."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(f"{endpoint.rstrip('/')}/v1/address", headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach the supervisor at {endpoint}: {exc}") from None
    if response.status_code != 200:
        raise click.ClickException(f"the supervisor at {endpoint} answered {response.status_code}: {response.text}")
    address: str = response.json()
    return address


async def run_worker(supervisor_address: str, host: str, port: int) -> None:
    pool = await create_pool(host, port)
    worker: WorkerRef | None = None
    try:
        worker = await xo.create_actor(
            WorkerActor, pool, supervisor_address, True, address=pool.external_address, uid=WorkerActor.default_uid()
        )
        logger.info("worker %s joined the supervisor at %s", pool.external_address, supervisor_address)
        await wait_for_signal()
    finally:
        logger.info("worker shutting down")
        if worker is not None:
            await stop_worker(worker)
        await pool.stop()
        logger.info("worker stopped")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--host",
    "-H",
    default=settings.DEFAULT_HOST,
    show_default=True,
    help="Address the API and the supervisor's actor port bind to.",
)
@click.option("--port", "-p", default=settings.DEFAULT_PORT, show_default=True, type=int, help="API port.")
@click.option("--supervisor-port", default=0, type=int, help="Actor port of the supervisor (0: any free port).")
@click.option("--log-level", default="info", show_default=True, type=_LOG_LEVELS)
@click.option("--mcp-config", envvar="XINFERENCE_MCP_CONFIG", default=None, metavar="FILE", help=MCP_CONFIG_HELP)
def supervisor_main(host: str, port: int, supervisor_port: int, log_level: str, mcp_config: str | None) -> None:
    """Run the API and the supervisor of a cluster."""
    loop = event_loop.choose()  # a bad XINFERENCE_EVENT_LOOP stops here, before logs or pools
    mcp = read_mcp_config(mcp_config)
    setup_logging(log_level, settings.logs_dir() / "supervisor.log")
    event_loop.run(run_supervisor(host, port, supervisor_port, log_level.lower(), mcp), loop)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--endpoint", "-e", required=True, help="The supervisor's API, e.g. http://10.0.0.1:9997.")
@click.option(
    "--host",
    "-H",
    default=settings.DEFAULT_HOST,
    show_default=True,
    help="Address this worker's actor port binds to (reachable by the supervisor).",
)
@click.option("--worker-port", default=0, type=int, help="Actor port of this worker (0: any free port).")
@click.option("--api-key", envvar="XINFERENCE_API_KEY", default=None, help="Key, when the API requires one.")
@click.option("--log-level", default="info", show_default=True, type=_LOG_LEVELS)
def worker_main(endpoint: str, host: str, worker_port: int, api_key: str | None, log_level: str) -> None:
    """Run a worker that joins the supervisor at ENDPOINT."""
    loop = event_loop.choose()  # a bad XINFERENCE_EVENT_LOOP stops here, before logs or pools
    setup_logging(log_level, settings.logs_dir() / "worker.log")
    address = discover_supervisor(endpoint, api_key)
    event_loop.run(run_worker(address, host, worker_port), loop)


if __name__ == "__main__":  # python -m xinference.deploy.cluster supervisor|worker [options]
    import sys

    commands = {"supervisor": supervisor_main, "worker": worker_main}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit("usage: python -m xinference.deploy.cluster supervisor|worker [options]")
    commands[sys.argv.pop(1)]()
