"""The supervisor's side of engine environments: start installs on workers and gather their progress (a plain part
of the supervisor). The installs themselves run on the workers (:mod:`xinference.core.env_jobs`)."""

from __future__ import annotations

from typing import Any

from xinference import settings
from xinference.core.supervisor.records import WorkerEntry, Workers
from xinference.engines.registry import resolve_engine_name
from xinference.errors import ModelNotFound, ModelUnavailable
from xinference.hardware import HardwareInfo

__all__ = ["EngineEnvs"]


class EngineEnvs:
    """Installs, reports and removes engine environments on ``workers``; a worker's hardware report is asked again
    once an install or a removal is over, so the matcher sees its engines as they are."""

    def __init__(self, workers: Workers) -> None:
        self._workers = workers

    def _targets(self, worker: str | None) -> list[WorkerEntry]:
        if not self._workers:
            raise ModelUnavailable("no worker has joined this cluster yet")
        targets = [w for w in self._workers.values() if worker in (None, w.address, w.address.split(":")[0])]
        if not targets:
            raise ModelNotFound(f"no worker {worker!r} in this cluster", param="worker_ip")
        return targets

    async def install(self, engine: str, worker: str | None = None, force: bool = False) -> list[dict[str, Any]]:
        """Start installing ``engine`` on every worker (or the one named); returns each worker's status at once."""
        name = resolve_engine_name(engine)
        timeout = settings.worker_call_timeout()
        return [
            await w.call(w.ref.install_engine(name, force), what="install_engine", timeout=timeout)
            for w in self._targets(worker)
        ]

    async def status(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        """Each worker's install progress and state for ``engine``. Once an install is over, the worker's fresh
        hardware report (with its engines' verdicts) replaces the old one, so the matcher sees the new engine."""
        name = resolve_engine_name(engine)
        statuses = []
        for target in self._targets(worker):
            status = await target.call(
                target.ref.engine_env(name), what="engine_env", timeout=settings.worker_call_timeout()
            )
            if not status["installing"]:
                await self._refresh_hardware(target)
            statuses.append(status)
        return statuses

    async def uninstall(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        name = resolve_engine_name(engine)
        results = []
        for target in self._targets(worker):
            results.append(await target.call(target.ref.uninstall_engine(name), what="uninstall_engine", timeout=None))
            await self._refresh_hardware(target)
        return results

    async def _refresh_hardware(self, worker: WorkerEntry) -> None:
        report = await worker.call(worker.ref.hardware(), what="hardware", timeout=settings.worker_call_timeout())
        worker.hardware = HardwareInfo.model_validate(report)
