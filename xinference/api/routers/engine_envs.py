"""Routes of the engine environments: install, follow, remove; list engine availability per worker.

Attached before the engine-matrix routes: ``GET /v1/engines/{engine}/install`` would otherwise be read as the
matrix of a model named ``install``.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from xinference.api.protocol.engine_envs import EngineEnvReport, EngineInstallRequest, EngineListing
from xinference.api.serving.engine_envs import EngineEnvsService

__all__ = ["attach_router"]

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
