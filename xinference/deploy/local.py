"""``xinference-local``: the API, the supervisor and one worker in one process; models in their subprocesses.

The same actors and calls as a cluster, with the supervisor and the worker sharing one xoscar main pool bound to
loopback. SIGINT/SIGTERM stop the HTTP server, terminate every model subprocess, then stop the pool: nothing is
left running.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import click
import uvicorn
import xoscar as xo

from xinference import settings
from xinference.api.app import create_app
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.deploy.logs import setup_logging

__all__ = ["main", "run_local"]

logger = logging.getLogger("xinference.local")


class _Server(uvicorn.Server):
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


async def run_local(
    host: str,
    port: int,
    log_level: str = "info",
    launch: tuple[str, ...] = (),
    internal_host: str = "127.0.0.1",
) -> None:
    """Start everything, serve until a signal, then shut everything down."""
    started = time.monotonic()
    pool = await xo.create_actor_pool(f"{internal_host}:0", n_process=0)
    address = pool.external_address
    worker: Any = None
    try:
        supervisor: Any = await xo.create_actor(SupervisorActor, address=address, uid=SupervisorActor.default_uid())
        worker = await xo.create_actor(
            WorkerActor, pool, address, address=address, uid=WorkerActor.default_uid()
        )
        app = create_app(address, settings.api_keys())
        server = _Server(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on")
        )
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if serving.done():
            await serving  # re-raises why uvicorn could not start (port in use, ...)
            return
        logger.info("Xinference ready at http://%s:%d in %.2fs", host, port, time.monotonic() - started)
        for name in launch:
            await _launch_default(supervisor, name)
        await serving
    finally:
        logger.info("shutting down")
        if worker is not None:
            try:
                await asyncio.wait_for(worker.shutdown(), timeout=30)
            except Exception:  # noqa: BLE001 - shutting down: log and keep going
                logger.warning("some model processes did not stop cleanly", exc_info=True)
        await pool.stop()
        logger.info("stopped")


async def _launch_default(supervisor: Any, model_name: str) -> None:
    started = time.monotonic()
    logger.info("launching %s ...", model_name)
    try:
        info = await supervisor.launch_model({"model_name": model_name})
    except Exception as exc:  # noqa: BLE001 - a failed auto-launch leaves the server up, with the reason logged
        logger.error("could not launch %s: %s", model_name, exc)
        return
    logger.info(
        "model %s ready (%s) in %.2fs", info["model_uid"], info["model_engine"], time.monotonic() - started
    )


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
def main(host: str, port: int, log_level: str, launch: tuple[str, ...]) -> None:
    """Run Xinference on this machine: API, supervisor and worker."""
    setup_logging(log_level, settings.logs_dir() / "local.log")
    asyncio.run(run_local(host, port, log_level.lower(), launch))


if __name__ == "__main__":
    main()
