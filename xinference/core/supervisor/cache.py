"""The supervisor's view of the model caches on the workers' disks (a plain part of the supervisor: each
call goes to the workers in its worker table)."""

from __future__ import annotations

from typing import Any

from xinference import settings
from xinference.core.supervisor.records import Workers
from xinference.errors import InvalidRequest, ModelNotFound

__all__ = ["Caches"]


class Caches:
    """Lists and removes cache entries on ``workers``."""

    def __init__(self, workers: Workers) -> None:
        self._workers = workers

    async def entries(self, model_name: str | None = None) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        for worker in list(self._workers.values()):
            entries.extend(
                await worker.call(
                    worker.ref.list_cache(model_name), what="list_cache", timeout=settings.worker_call_timeout()
                )
            )
        return entries

    async def remove(
        self, entry_id: str | None = None, model_name: str | None = None, worker: str | None = None
    ) -> list[dict[str, Any]]:
        """Delete one entry (by id) or every entry ``model_name`` was launched from, on one worker or all."""
        if bool(entry_id) == bool(model_name):
            raise InvalidRequest("give exactly one of entry or model_name", param="entry")
        targets = [w for w in self._workers.values() if worker in (None, w.address)]
        if worker is not None and not targets:
            raise ModelNotFound(f"no worker {worker!r} in this cluster", param="worker")
        removed: list[dict[str, Any]] = []
        for target in targets:
            ids = (
                [entry_id]
                if entry_id
                else [
                    e["id"]
                    for e in await target.call(
                        target.ref.list_cache(model_name), what="list_cache", timeout=settings.worker_call_timeout()
                    )
                ]
            )
            for one in ids:
                try:
                    removed.append(await target.call(target.ref.remove_cache(one), what="remove_cache", timeout=None))
                except ModelNotFound:
                    if len(targets) == 1:
                        raise
        if not removed:
            what = f"entry {entry_id!r}" if entry_id else f"entry of model {model_name!r}"
            raise ModelNotFound(f"no cache {what}; `xinference cached` lists the cache", param="entry")
        return removed
