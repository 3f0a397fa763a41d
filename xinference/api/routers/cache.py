"""Routes of the model cache (downloaded weights on the workers): dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from xinference.api.protocol.cache import CacheList, RemovedList
from xinference.api.serving.cache import CacheService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> CacheService:
    return CacheService(request.app.state.supervisor)


@router.get("/v1/cache/models")
async def list_cached(request: Request, model_name: str | None = None, worker_ip: str | None = None) -> CacheList:
    return await _service(request).list(model_name, worker_ip)


@router.delete("/v1/cache/models")
async def remove_cached(
    request: Request, entry: str | None = None, model_name: str | None = None, worker_ip: str | None = None
) -> RemovedList:
    return await _service(request).remove(entry, model_name, worker_ip)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
