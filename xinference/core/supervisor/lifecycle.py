"""Unloading an idle model and loading it again (keep-alive).

An unloaded model keeps its record (uid, engine, spec, options, events) with status ``unloaded`` and no replica:
its processes have ended, so its memory and GPUs are free. :meth:`Lifecycle.load` places and starts its replicas
again from the launch request it kept, exactly as the first launch did. The API decides when
(``xinference/api/gateway/keepalive.py``); this part only does it, once at a time per model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.launcher import Launcher
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import LaunchRequest, ModelRecord
from xinference.errors import InvalidRequest, ModelNotFound, ModelUnavailable, XinferenceError

__all__ = ["Lifecycle"]

logger = logging.getLogger(__name__)


class Lifecycle:
    """Unloads and reloads the models of ``models``, booking through ``booker`` under ``lock`` like a launch, and
    stopping and starting replicas through ``launcher``."""

    def __init__(self, models: ModelTable, booker: Booker, lock: asyncio.Lock, launcher: Launcher) -> None:
        self._models = models
        self._booker = booker
        self._lock = lock
        self._launcher = launcher
        #: uid -> the load in progress, which concurrent loads of the same model share
        self._reloads: dict[str, asyncio.Task[None]] = {}

    async def unload(self, model_uid: str, why: str = "asked to") -> dict[str, Any]:
        """End every replica's process but keep the model listed (``unloaded``) with its launch plan."""
        record = self._models.get(model_uid)
        if record.status not in ("ready", "degraded"):
            raise InvalidRequest(
                f"model {model_uid!r} is {record.status}; only a serving model unloads", param="model_uid"
            )
        record.status = "unloading"
        self._models.changed()
        await self._launcher.stop_replicas(record, why=f"model {model_uid!r} was unloaded ({why})")
        record.status = "unloaded"
        record.event("unloaded", why)
        self._models.changed()
        logger.info("model %s unloaded: %s", model_uid, why)
        return record.info()

    async def load(self, model_uid: str) -> dict[str, Any]:
        """Start the replicas of an unloaded model again (concurrent calls share one load); returns its info once
        it serves. A model that already serves is returned as it is."""
        record = self._models.get(model_uid)
        for _ in range(600):  # an unload in progress (by hand or keep-alive) finishes first, within a minute
            if record.status != "unloading":
                break
            await asyncio.sleep(0.1)
        task = self._reloads.get(model_uid)
        if task is None:
            if record.status in ("ready", "degraded"):
                return record.info()
            if record.status != "unloaded":
                raise ModelUnavailable(
                    f"model {model_uid!r} is {record.status}; it cannot be loaded now", retry_after=5.0
                )
            task = self._reloads[model_uid] = asyncio.create_task(self._reload(record))
            task.add_done_callback(lambda _t: self._reloads.pop(model_uid, None))
        await asyncio.shield(task)
        if not self._models.holds(model_uid, record):
            raise ModelNotFound(f"model {model_uid!r} was terminated while it loaded", param="model_uid")
        if record.status not in ("ready", "degraded"):
            raise ModelUnavailable(
                f"model {model_uid!r} did not load again: {record.status}; see its events", retry_after=10.0
            )
        return record.info()

    async def _reload(self, record: ModelRecord) -> None:
        """Place, check and book the replicas again exactly as a launch does (the same lock, memory check,
        tensor-parallel sizing and ledger), then start them."""
        launch = (
            LaunchRequest(**record.launch)
            if record.launch
            else LaunchRequest(model_name=record.choice.family.model_name, model_type=record.choice.family.model_type)
        )
        record.status = "launching"
        record.event("loading", "a request named the unloaded model")
        self._models.changed()
        try:
            await self._booker.refresh(self._booker.candidates(launch, record.replica))
            async with self._lock:
                placements = self._booker.sized(record, record.replica, launch)
                booked = self._booker.book(record, placements, check_memory=not launch.ignore_memory_check)
        except Exception as exc:
            record.status = "unloaded"
            record.event("load_failed", exc.message if isinstance(exc, XinferenceError) else type(exc).__name__)
            self._models.changed()
            raise
        await self._launcher.start_all(record, booked, keep_failed=True)
