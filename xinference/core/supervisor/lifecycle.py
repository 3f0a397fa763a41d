"""Unloading an idle model and loading it again (keep-alive, issue 12), and the limits a launch sets.

A mixin of SupervisorActor. An unloaded model keeps its record (uid, engine, spec, options, events) with status
``unloaded`` and no replica: its processes have ended, so its memory and GPUs are free. ``load_model`` places and
starts its replicas again from the launch request it kept, exactly as the first launch did. The API decides when
(``xinference/api/gateway/keepalive.py``); these methods only do it, once at a time per model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xinference import settings
from xinference.core.launch import describe_keep_alive, parse_keep_alive
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.records import LaunchRequest, ModelRecord
from xinference.errors import InvalidRequest, ModelNotFound, ModelUnavailable, XinferenceError

__all__ = ["LifecycleMixin", "launch_limits"]

logger = logging.getLogger(__name__)


def launch_limits(launch: LaunchRequest) -> dict[str, Any]:
    """The operations fields of a launch, checked (400 naming the field), with the server's defaults applied."""
    raw = launch.keep_alive if launch.keep_alive is not None else settings.keep_alive_default()
    keep = None if raw is None else parse_keep_alive(raw)
    if launch.max_queued is not None and launch.max_queued < 0:
        raise InvalidRequest("max_queued must be 0 or more", param="max_queued")
    if launch.queue_timeout is not None and launch.queue_timeout <= 0:
        raise InvalidRequest("queue_timeout must be a positive number of seconds", param="queue_timeout")
    return {"keep_alive": keep, "keep_alive_text": describe_keep_alive(keep), "max_queued": launch.max_queued,
            "queue_timeout": launch.queue_timeout}


class LifecycleMixin:
    """Needs SupervisorActor's ``_models``, ``_get``, ``_booker``, ``_lock``, ``_start_all``, ``_stop_replicas``,
    ``_changed``."""

    _models: dict[str, ModelRecord]

    def _reloads(self) -> dict[str, asyncio.Task[None]]:
        tasks: dict[str, asyncio.Task[None]] | None = getattr(self, "_reload_tasks", None)
        if tasks is None:
            tasks = {}
            self._reload_tasks = tasks
        return tasks

    async def unload_model(self, model_uid: str, why: str = "asked to") -> dict[str, Any]:
        """End every replica's process but keep the model listed (``unloaded``) with its launch plan."""
        record = self._get(model_uid)  # type: ignore[attr-defined]
        if record.status not in ("ready", "degraded"):
            raise InvalidRequest(f"model {model_uid!r} is {record.status}; only a serving model unloads",
                                 param="model_uid")
        record.status = "unloading"
        self._changed()  # type: ignore[attr-defined]
        await self._stop_replicas(record, why=f"model {model_uid!r} was unloaded ({why})")  # type: ignore[attr-defined]
        record.status = "unloaded"
        record.event("unloaded", why)
        self._changed()  # type: ignore[attr-defined]
        logger.info("model %s unloaded: %s", model_uid, why)
        info: dict[str, Any] = record.info()
        return info

    async def load_model(self, model_uid: str) -> dict[str, Any]:
        """Start the replicas of an unloaded model again (concurrent calls share one load); returns its info once
        it serves. A model that already serves is returned as it is."""
        record: ModelRecord = self._get(model_uid)  # type: ignore[attr-defined]
        for _ in range(600):  # an unload in progress (by hand or keep-alive) finishes first, within a minute
            if record.status != "unloading":
                break
            await asyncio.sleep(0.1)
        task = self._reloads().get(model_uid)
        if task is None:
            if record.status in ("ready", "degraded"):
                served: dict[str, Any] = record.info()
                return served
            if record.status != "unloaded":
                raise ModelUnavailable(f"model {model_uid!r} is {record.status}; it cannot be loaded now",
                                       retry_after=5.0)
            task = self._reloads()[model_uid] = asyncio.create_task(self._reload(record))
            task.add_done_callback(lambda _t: self._reloads().pop(model_uid, None))
        await asyncio.shield(task)
        if model_uid not in self._models or self._models[model_uid] is not record:
            raise ModelNotFound(f"model {model_uid!r} was terminated while it loaded", param="model_uid")
        if record.status not in ("ready", "degraded"):
            raise ModelUnavailable(f"model {model_uid!r} did not load again: {record.status}; see its events",
                                   retry_after=10.0)
        info: dict[str, Any] = record.info()
        return info

    async def _reload(self, record: ModelRecord) -> None:
        """Place, check and book the replicas again exactly as a launch does (the same lock, memory check,
        tensor-parallel sizing and ledger), then start them."""
        launch = LaunchRequest(**record.launch) if record.launch else LaunchRequest(
            model_name=record.choice.family.model_name, model_type=record.choice.family.model_type)
        record.status = "launching"
        record.event("loading", "a request named the unloaded model")
        self._changed()  # type: ignore[attr-defined]
        booker: Booker = self._booker  # type: ignore[attr-defined]
        try:
            await booker.refresh(booker.candidates(launch, record.replica))
            async with self._lock:  # type: ignore[attr-defined]
                placements = booker.sized(record, record.replica, launch)
                booked = booker.book(record, placements, check_memory=not launch.ignore_memory_check)
        except Exception as exc:
            record.status = "unloaded"
            record.event("load_failed", exc.message if isinstance(exc, XinferenceError) else type(exc).__name__)
            self._changed()  # type: ignore[attr-defined]
            raise
        await self._start_all(record, booked, keep_failed=True)  # type: ignore[attr-defined]
