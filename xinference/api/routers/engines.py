"""Routes of the engine matrix (Xinference-compatible): which engine can run a model here, or why not."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from xinference.api.protocol.engines import EngineTable
from xinference.api.serving.engines import EnginesService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> EnginesService:
    service = getattr(request.app.state, "engines", None)
    if service is None:
        service = request.app.state.engines = EnginesService(request.app.state.supervisor)
    return service


@router.get("/v1/engines/{model_name}")
async def query_engines(model_name: str, request: Request) -> EngineTable:
    return await _service(request).query(model_name)


@router.get("/v1/engines/{model_type}/{model_name}")
async def query_engines_by_type(model_type: str, model_name: str, request: Request) -> EngineTable:
    return await _service(request).query(model_name, model_type)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
