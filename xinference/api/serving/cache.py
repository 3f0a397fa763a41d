"""What the model-cache routes do: ask the supervisor, which asks every worker (the cache is on their disks)."""

from __future__ import annotations

from typing import Any

from xinference.api.protocol.cache import CacheList, RemovedList

__all__ = ["CacheService"]


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
