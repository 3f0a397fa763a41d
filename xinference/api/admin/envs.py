"""The engine environments: install on the workers, follow, remove; list engine availability per worker.

The service starts installs on the workers (through the supervisor), follows them and removes them. Its routes
must be attached before the engine matrix's (:mod:`xinference.api.admin.engines`): ``GET
/v1/engines/{engine}/install`` would otherwise be read as the matrix of a model named ``install``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from xinference.core.refs import SupervisorRef
from xinference.engines.registry import ENGINE_ORDER, resolve_engine_name
from xinference.errors import EngineError

__all__ = ["EngineEnvReport", "EngineEnvsService", "EngineInstallRequest", "EngineListing", "attach_router"]

_POLL_S = 1.0


# -- protocol ----------------------------------------------------------------------------------------------------------
class EngineInstallRequest(BaseModel):
    """``POST /v1/engines/{engine}/install``: install on every worker, or on ``worker_ip`` only."""

    model_config = ConfigDict(extra="forbid")

    worker_ip: str | None = Field(default=None, description="only this worker (address or host)")
    force: bool = Field(default=False, description="reinstall even when the same recipe is installed")
    wait: bool = Field(default=False, description="answer once the install has ended (minutes for vLLM)")
    timeout: float = Field(default=1800.0, gt=0, le=7200, description="seconds `wait` may take")


class EngineEnvReport(BaseModel):
    """Per worker: ``installed``, ``installing``, ``progress`` (stage, message, fraction, log tail), ``error``,
    ``packages`` (the recipe's packages with versions) and ``check`` (the library verdict: empty when usable)."""

    engine: str
    workers: list[dict[str, Any]]


#: ``GET /v1/engines``: engine name → worker address → "" (available) or the reason it is not.
EngineListing = dict[str, dict[str, str]]


# -- serving -----------------------------------------------------------------------------------------------------------
class EngineEnvsService:
    def __init__(self, supervisor: SupervisorRef) -> None:
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


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> EngineEnvsService:
    return EngineEnvsService(request.app.state.supervisor)


@router.get("/v1/engines")
async def list_engines(request: Request) -> EngineListing:
    return await _service(request).listing()


@router.post("/v1/engines/{engine}/install")
async def install_engine(engine: str, request: Request, body: EngineInstallRequest | None = None) -> EngineEnvReport:
    return await _service(request).install(engine, body or EngineInstallRequest())


@router.get("/v1/engines/{engine}/install")
async def engine_install_status(engine: str, request: Request, worker_ip: str | None = None) -> EngineEnvReport:
    return await _service(request).status(engine, worker_ip)


@router.post("/v1/engines/{engine}/uninstall")
async def uninstall_engine(engine: str, request: Request, worker_ip: str | None = None) -> EngineEnvReport:
    return await _service(request).uninstall(engine, worker_ip)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
