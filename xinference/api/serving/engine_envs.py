"""What the engine-environment routes do: start installs on the workers, follow them, remove them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from xinference.api.protocol.engine_envs import EngineEnvReport, EngineInstallRequest, EngineListing
from xinference.engines.registry import ENGINE_ORDER, resolve_engine_name
from xinference.errors import EngineError

__all__ = ["EngineEnvsService"]

_POLL_S = 1.0


class EngineEnvsService:
    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    async def install(self, engine: str, body: EngineInstallRequest) -> EngineEnvReport:
        name = resolve_engine_name(engine)
        workers = await self._supervisor.install_engine(name, body.worker_ip, body.force)
        if body.wait:
            deadline = time.monotonic() + body.timeout
            while any(w["installing"] for w in workers) and time.monotonic() < deadline:
                await asyncio.sleep(_POLL_S)
                workers = await self._supervisor.engine_env_status(name, body.worker_ip)
            failed = [w for w in workers if w.get("error")]
            if failed:
                raise EngineError(f"installing {name} failed on {failed[0]['worker']}: {failed[0]['error']}")
        return EngineEnvReport(engine=name, workers=workers)

    async def status(self, engine: str, worker_ip: str | None) -> EngineEnvReport:
        name = resolve_engine_name(engine)
        return EngineEnvReport(engine=name, workers=await self._supervisor.engine_env_status(name, worker_ip))

    async def uninstall(self, engine: str, worker_ip: str | None) -> EngineEnvReport:
        name = resolve_engine_name(engine)
        return EngineEnvReport(engine=name, workers=await self._supervisor.uninstall_engine(name, worker_ip))

    async def listing(self) -> EngineListing:
        """Every engine's availability on every worker (from the workers' own reports)."""
        workers = await self._supervisor.list_workers()
        listing: EngineListing = {engine: {} for engine in ENGINE_ORDER}
        for worker in workers:
            verdicts = (worker.get("hardware") or {}).get("engines") or {}
            for engine in ENGINE_ORDER:
                listing[engine][worker["address"]] = verdicts.get(engine, "not reported by this worker")
        return listing
