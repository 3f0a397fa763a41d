"""The supervisor's side of engine environments: start installs on workers and gather their progress (a mixin of
SupervisorActor). The installs themselves run on the workers (:mod:`xinference.core.env_jobs`)."""

from __future__ import annotations

from typing import Any

from xinference import settings
from xinference.engines.registry import resolve_engine_name
from xinference.errors import ModelNotFound, ModelUnavailable

__all__ = ["EnvsMixin"]


class EnvsMixin:
    """Needs ``self._workers`` (address → WorkerEntry) and ``self._changed()``."""

    _workers: dict[str, Any]

    def _env_targets(self, worker: str | None) -> list[Any]:
        if not self._workers:
            raise ModelUnavailable("no worker has joined this cluster yet")
        targets = [w for w in self._workers.values() if worker in (None, w.address, w.address.split(":")[0])]
        if not targets:
            raise ModelNotFound(f"no worker {worker!r} in this cluster", param="worker_ip")
        return targets

    async def install_engine(self, engine: str, worker: str | None = None, force: bool = False
                             ) -> list[dict[str, Any]]:
        """Start installing ``engine`` on every worker (or the one named); returns each worker's status at once."""
        name = resolve_engine_name(engine)
        timeout = settings.worker_call_timeout()
        return [await w.call("install_engine", name, force, timeout=timeout) for w in self._env_targets(worker)]

    async def engine_env_status(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        """Each worker's install progress and state for ``engine``. Once an install is over, the worker's fresh
        hardware report (with its engines' verdicts) replaces the old one, so the matcher sees the new engine."""
        name = resolve_engine_name(engine)
        statuses = []
        for target in self._env_targets(worker):
            status = await target.call("engine_env", name, timeout=settings.worker_call_timeout())
            if not status["installing"]:
                await self._refresh_worker_hardware(target)
            statuses.append(status)
        return statuses

    async def uninstall_engine(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        name = resolve_engine_name(engine)
        results = []
        for target in self._env_targets(worker):
            results.append(await target.call("uninstall_engine", name, timeout=None))
            await self._refresh_worker_hardware(target)
        return results

    async def _refresh_worker_hardware(self, worker: Any) -> None:
        from xinference.hardware import HardwareInfo

        report = await worker.call("hardware", timeout=settings.worker_call_timeout())
        worker.hardware = HardwareInfo.model_validate(report)
