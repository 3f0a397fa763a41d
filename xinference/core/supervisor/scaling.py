"""Scaling a running model: more replicas, placed, checked and booked like a launch's, or one fewer.

Plain code given the model table, the booker, the ledger, the supervisor's lock and the launcher (which starts and
stops each replica on its worker).
"""

from __future__ import annotations

import asyncio
from typing import Any

from xinference.core.ledger import Ledger
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.launcher import Launcher
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import FOLLOWS_REPLICAS, LaunchRequest
from xinference.errors import InvalidRequest, ModelNotFound

__all__ = ["Scaler"]


class Scaler:
    """Adds replicas to a serving model and removes one (never the last: that is a terminate)."""

    def __init__(
        self, models: ModelTable, booker: Booker, ledger: Ledger, lock: asyncio.Lock, launcher: Launcher
    ) -> None:
        self._models = models
        self._booker = booker
        self._ledger = ledger
        self._lock = lock
        self._launcher = launcher

    async def add(
        self, model_uid: str, count: int = 1, n_gpu: int | str | None = "auto", worker_ip: str | None = None
    ) -> dict[str, Any]:
        """Start ``count`` more replicas of a running model, placed, checked and booked like a launch's."""
        record = self._models.get(model_uid)
        if count < 1:
            raise InvalidRequest("replica must be at least 1", param="replica")
        launch = LaunchRequest(model_name=record.choice.family.model_name, n_gpu=n_gpu, worker_ip=worker_ip)
        await self._booker.refresh(self._booker.candidates(launch, count))
        async with self._lock:
            if not self._models.holds(model_uid, record):
                raise ModelNotFound(f"model {model_uid!r} was terminated meanwhile", param="model_uid")
            if record.status not in FOLLOWS_REPLICAS:
                raise InvalidRequest(
                    f"model {model_uid!r} is {record.status}; only a serving model gets more replicas",
                    param="model_uid",
                )
            placements = self._booker.sized(record, count, launch)
            booked = self._booker.book(
                record, placements, check_memory=not record.launch.get("ignore_memory_check", False)
            )
        started = []
        try:
            for replica_uid in booked:
                await self._launcher.start_replica(record, replica_uid)
                record.replica += 1
                started.append(record.replicas[-1].info())
                self._models.changed()
        finally:
            for replica_uid in booked[len(started) :]:
                self._ledger.release(replica_uid)
            record.refresh_status()
        return {"model_uid": model_uid, "replica": record.replica, "replicas": started}

    async def remove(self, model_uid: str, replica_id: int) -> int:
        """Stop one replica (``<uid>-<replica_id>``); returns how many remain. The last one cannot go this way."""
        record = self._models.get(model_uid)
        replica_uid = f"{model_uid}-{replica_id}"
        target = next((r for r in record.replicas if r.replica_uid == replica_uid), None)
        if target is None:
            known = ", ".join(r.replica_uid.rsplit("-", 1)[1] for r in record.replicas)
            raise ModelNotFound(
                f"model {model_uid!r} has no replica {replica_id}; its replicas are: {known}", param="replica_id"
            )
        if len(record.replicas) == 1:
            raise InvalidRequest(f"{replica_uid} is the last replica; terminate the model instead", param="replica_id")
        record.replica -= 1
        await self._launcher.stop_replicas(record, [target], why=f"replica {replica_uid} was removed (scale-down)")
        record.event("replica_removed", f"{replica_uid} on {target.worker_address}")
        return len(record.replicas)
