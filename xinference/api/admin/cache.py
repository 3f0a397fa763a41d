"""The model cache (downloaded weights on the workers): ``GET /v1/cache/models`` and ``DELETE /v1/cache/models``.

An entry is one downloaded repository revision on one worker (see :mod:`xinference.model.cache`); its ``id``
(``huggingface/org--name/main``) is what ``DELETE /v1/cache/models?entry=ID`` takes. ``?model_name=NAME`` instead
removes every entry that model was launched from. The list answer uses Xinference's ``{"list": [...]}`` shape. The
service asks the supervisor, which asks every worker (the cache is on their disks).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field

__all__ = ["CacheEntry", "CacheList", "CacheService", "RemovedEntry", "RemovedList", "attach_router"]


# -- protocol ----------------------------------------------------------------------------------------------------------
class CacheEntry(BaseModel):
    id: str = Field(description="hub/org--repo/revision, or bundled/<package>")
    hub: str
    repo_id: str
    revision: str | None = None
    commit: str | None = None
    model_names: list[str] = Field(default_factory=list, description="models launched from this entry")
    files: list[str] = Field(default_factory=list)
    size_bytes: int = 0
    partial_bytes: int = Field(default=0, description="bytes of transfers not finished yet (resumed next launch)")
    updated: int | None = None
    path: str
    worker: str


class CacheList(BaseModel):
    list: list[CacheEntry]


class RemovedEntry(BaseModel):
    id: str
    freed_bytes: int
    worker: str


class RemovedList(BaseModel):
    removed: list[RemovedEntry]


# -- serving -----------------------------------------------------------------------------------------------------------
class CacheService:
    """List and remove downloaded weights across the cluster."""

    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    async def list(self, model_name: str | None = None, worker: str | None = None) -> CacheList:
        entries = await self._supervisor.list_cache(model_name)
        return CacheList.model_validate({"list": [e for e in entries if worker in (None, e["worker"])]})

    async def remove(self, entry: str | None, model_name: str | None, worker: str | None) -> RemovedList:
        removed = await self._supervisor.remove_cache(entry, model_name, worker)
        return RemovedList.model_validate({"removed": removed})


# -- routes ------------------------------------------------------------------------------------------------------------
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
