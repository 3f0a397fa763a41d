"""Launching and stopping models: decide (engine, spec, workers, GPUs), book, start each replica on its worker,
and stop, cancel or terminate.

A launch is decided under the supervisor's lock: placement, the memory check and the uid are settled and the
ledger books the launch's GPUs and memory before the lock is released, so overlapping launches see each other's
bookings (``booking.py``). The replicas then start one after the other, outside the lock; a failure (or a
terminate meanwhile) stops the ones started and releases every booking of the launch. Stopping a replica takes it
out of its record at once, and its booking is released once its worker confirms it is gone.

Plain code given its collaborators (the model table, the worker table, the ledger, the booker, the lock, the
background tasks, the tombstones and the launch history); the only calls that leave the process go to the
workers' references in the worker table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.background import BackgroundTasks
from xinference.core.launch import LaunchPlan, describe_keep_alive, parse_keep_alive
from xinference.core.ledger import Ledger
from xinference.core.placement import Placement
from xinference.core.supervisor.autostart import History
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import LaunchRequest, ModelRecord, Replica, Workers
from xinference.core.supervisor.tombstones import Tombstones
from xinference.engines.matcher import choose_engine
from xinference.engines.registry import get_engine_class
from xinference.errors import (
    InvalidRequest,
    LaunchFailed,
    ModelAlreadyExists,
    ModelNotFound,
    ModelUnavailable,
    XinferenceError,
)
from xinference.model.draft import plan_draft
from xinference.model.projector import plan_projector
from xinference.model.registry import ModelRegistry, SpecChoice
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["Launcher", "launch_limits"]

logger = logging.getLogger(__name__)


def launch_limits(launch: LaunchRequest) -> dict[str, Any]:
    """The operations fields of a launch, checked (400 naming the field), with the server's defaults applied."""
    raw = launch.keep_alive if launch.keep_alive is not None else settings.keep_alive_default()
    keep = None if raw is None else parse_keep_alive(raw)
    if launch.max_queued is not None and launch.max_queued < 0:
        raise InvalidRequest("max_queued must be 0 or more", param="max_queued")
    if launch.queue_timeout is not None and launch.queue_timeout <= 0:
        raise InvalidRequest("queue_timeout must be a positive number of seconds", param="queue_timeout")
    return {
        "keep_alive": keep,
        "keep_alive_text": describe_keep_alive(keep),
        "max_queued": launch.max_queued,
        "queue_timeout": launch.queue_timeout,
        "mcp_servers": launch.mcp_servers,
    }


class Launcher:
    """Decides, books, starts and stops the replicas of the models in ``models``.

    ``incarnation`` is this supervisor process's identity, carried by every replica it starts: a replica a worker
    reports later from this incarnation whose launch is not running any more was terminated or failed here."""

    def __init__(
        self,
        registry: ModelRegistry,
        models: ModelTable,
        workers: Workers,
        ledger: Ledger,
        booker: Booker,
        lock: asyncio.Lock,
        background: BackgroundTasks,
        tombstones: Tombstones,
        history: History,
        incarnation: str,
    ) -> None:
        self._registry = registry
        self._models = models
        self._workers = workers
        self._ledger = ledger
        self._booker = booker
        self._lock = lock
        self._background = background
        self._tombstones = tombstones
        self._history = history
        self.incarnation = incarnation
        #: set by :meth:`shutdown`: the models it terminates keep their autostart (they come back at the next start)
        self.closing = False

    # -- launching ---------------------------------------------------------------------------------------------
    async def launch(self, request: dict[str, Any], wait_ready: bool = True) -> dict[str, Any]:
        """Decide, place and start a model; returns its info once every replica serves.

        With ``wait_ready=False`` it returns once the decisions are made and the uid is reserved; the replicas
        start in the background, and a failure leaves the model listed as ``failed`` with the reason in its events.
        """
        launch = LaunchRequest(**request)
        if launch.replica < 1:
            raise InvalidRequest("replica must be at least 1", param="replica")
        limits = launch_limits(launch)
        family = self._registry.get(launch.model_name, launch.model_type)
        choices = self._registry.choices(
            family, launch.model_format, launch.model_size_in_billions, launch.quantization
        )
        await self._booker.refresh(self._booker.candidates(launch, launch.replica))  # bounded, outside the lock
        # Placement, the memory check and the uid are decided under the lock, and the ledger books the launch's
        # GPUs and memory before the lock is released: overlapping launches see each other's bookings.
        async with self._lock:
            record, booked = self._decide(request, launch, limits, family, choices)
        record.event(
            "launching",
            f"{record.model_engine}, {record.choice.spec.model_format} "
            f"{record.choice.quantization}, {launch.replica} replica(s)",
        )
        if not wait_ready:
            self._background.spawn(self.start_all(record, booked, keep_failed=True), f"launch-{record.model_uid}")
            return record.info()
        await self.start_all(record, booked, keep_failed=False)
        return record.info()

    def _decide(
        self,
        request: dict[str, Any],
        launch: LaunchRequest,
        limits: dict[str, Any],
        family: ModelFamily,
        choices: list[SpecChoice],
    ) -> tuple[ModelRecord, list[str]]:
        """Engine, spec, workers and GPUs of a launch; registers its record (``launching``) with its replicas booked
        in the ledger. Called under the lock."""
        placements = self._booker.place(launch.replica, launch)
        hardware = self._booker.devices_for(placements[0])
        matched = choose_engine(launch.model_engine, choices, hardware)
        choice = matched.accepted[0]
        engine_cls = get_engine_class(matched.engine)
        # enable_mtp / draft_model_path are launch fields: a draft plan for every replica, not engine options
        launch.engine_kwargs, draft = plan_draft(
            self._registry, choice, matched.engine, engine_cls.config_class, launch.engine_kwargs
        )
        # multimodal_projector is a launch field too: the projector file fetched beside the weights
        launch.engine_kwargs, projector = plan_projector(
            choice, matched.engine, engine_cls.config_class, launch.engine_kwargs
        )
        config = engine_cls.parse_config(launch.engine_kwargs)  # a 400 naming the option before any process
        # what is wrong with the request itself comes first (above); then whether its uid is free
        uid = validate_model_name(launch.model_uid, "model_uid") if launch.model_uid else family.model_name
        if uid in self._models:
            hint = "" if launch.model_uid else "; pass model_uid to run another instance"
            raise ModelAlreadyExists(f"a model with uid {uid!r} is already running{hint}", param="model_uid")
        if self._ledger.of_model(uid):  # a terminated launch of this uid still has a replica loading or stopping
            raise ModelUnavailable(
                f"the previous model with uid {uid!r} is still stopping; retry in a moment", retry_after=2.0
            )
        record = ModelRecord(
            uid,
            choice,
            matched.engine,
            launch.replica,
            engine_kwargs=dict(launch.engine_kwargs),
            hardware=hardware,
            sources={
                "model_path": launch.model_path,
                "download_hub": launch.download_hub,
                "draft": draft,
                "projector": projector,
            },
            launch=dict(request),
            limits=limits,
        )
        record._engine = (engine_cls, config)  # resolved and parsed once for the whole launch
        placements = self._booker.sized(record, launch.replica, launch)
        record.hardware = self._booker.devices_for(placements[0])
        booked = self._booker.book(record, placements, check_memory=not launch.ignore_memory_check)
        self._models.add(record)
        self._models.changed()
        return record, booked

    async def start_all(self, record: ModelRecord, booked: list[str], keep_failed: bool) -> None:
        """Start the booked replicas one after the other; on any failure (or a terminate meanwhile) stop the ones
        started and release every booking of the launch. ``keep_failed``: a failure leaves the model listed as
        ``failed`` (a launch in the background, a reload) instead of raising and unlisting it."""
        began = time.monotonic()
        try:
            for replica_uid in booked:
                if record.cancelled:  # terminated (or cancelled) while an earlier replica was starting
                    raise LaunchFailed(f"the launch of {record.model_uid!r} was cancelled")
                await self.start_replica(record, replica_uid)
        except BaseException as exc:
            for replica_uid in booked:
                if not any(r.replica_uid == replica_uid for r in record.replicas):
                    self._ledger.release(replica_uid)  # never started, or its worker removed it when it failed
            await self.stop_replicas(record, why=f"the launch of model {record.model_uid!r} failed")
            reason = exc.message if isinstance(exc, XinferenceError) else type(exc).__name__
            record.event("launch_failed", reason)
            if keep_failed and not record.cancelled and not isinstance(exc, asyncio.CancelledError):
                record.status = "failed"
                logger.error("background launch of %s failed: %s", record.model_uid, reason.splitlines()[0])
            else:
                async with self._lock:
                    if self._models.holds(record.model_uid, record):  # a relaunch may hold the uid by now
                        self._models.remove(record.model_uid)
            self._models.changed()
            if not keep_failed or isinstance(exc, asyncio.CancelledError):
                raise
            return
        record.status = "ready"
        record.load_seconds = round(time.monotonic() - began, 3)
        record.event("ready", "every replica serves")
        self._models.changed()
        if record.launch:
            self._history.remember(record.model_uid, record.launch, record.model_engine)
        logger.info("model %s ready (%s, %s)", record.model_uid, record.model_engine, record.choice.spec.model_format)

    async def start_replica(self, record: ModelRecord, replica_uid: str) -> None:
        """Start one booked replica on its worker. The booking is released when the start fails (the worker removes
        what it started) and becomes ``running`` when it serves."""
        booking = self._ledger.get(replica_uid)
        if booking is None:  # released meanwhile: its worker was declared gone
            raise ModelUnavailable(f"the worker chosen for {replica_uid} left the cluster during the launch")
        worker = self._workers.get(booking.worker)
        if worker is None:
            self._ledger.release(replica_uid)
            raise ModelUnavailable(f"worker {booking.worker} left the cluster during the launch")
        choice = record.choice
        placement = Placement(booking.worker, booking.gpus)
        plan = LaunchPlan(
            model_uid=record.model_uid,
            replica_uid=replica_uid,
            model_engine=record.model_engine,
            family=choice.family.model_dump(mode="json"),
            spec=choice.spec.model_dump(mode="json"),
            quantization=choice.quantization,
            engine_config=dict(record.engine_kwargs),
            hardware=self._booker.devices_for(placement).model_dump(mode="json"),
            gpu_indices=list(booking.gpus),
            launch_id=record.launch_id,
            incarnation=self.incarnation,
            **record.sources,
        )
        record.pending = (worker.address, replica_uid)
        try:
            # no time limit (a download may take hours), but a worker declared gone ends the wait
            facts = await worker.call(worker.ref.launch_replica(plan), what="launch_replica", timeout=None)
        except BaseException:
            self._ledger.release(replica_uid)
            raise
        finally:
            record.pending = None
        self._ledger.mark(replica_uid, "running")
        record.replicas.append(Replica(replica_uid, worker.address, facts["address"], facts.get("pid"), booking.gpus))
        record.event("replica_started", f"{replica_uid} on {worker.address}")
        if record.cancelled:
            raise LaunchFailed(f"the launch of {record.model_uid!r} was cancelled")
        record.engine_config = facts.get("engine_config", {})

    async def progress(self, model_uid: str) -> float:
        """0.0-1.0 for a model being launched (replicas done plus the current one's download), 1.0 once ready."""
        record = self._models.get(model_uid)
        if record.status != "launching":
            return 1.0
        current = 0.0
        pending = record.pending
        worker = self._workers.get(pending[0]) if pending else None
        if pending and worker is not None:
            with contextlib.suppress(XinferenceError):
                current = float(
                    await worker.call(
                        worker.ref.launch_progress(pending[1]),
                        what="launch_progress",
                        timeout=settings.worker_call_timeout(),
                    )
                )
        return min((len(record.replicas) + current) / max(record.replica, 1), 1.0)

    async def cancel(self, model_uid: str) -> None:
        """Stop a launch in progress: the download stops and the launch fails with "... was cancelled"."""
        record = self._models.get(model_uid)
        if record.status != "launching":
            raise InvalidRequest(
                f"model {model_uid!r} is already {record.status}; terminate it instead", param="model_uid"
            )
        record.cancelled = True
        await self._cancel_pending(record)
        logger.info("launch of %s cancelled", model_uid)

    async def _cancel_pending(self, record: ModelRecord) -> None:
        """Tell the worker of the replica being started to stop it (it remembers the cancel when the replica's
        process does not exist yet). Its launch then fails and releases what it booked."""
        pending = record.pending
        worker = self._workers.get(pending[0]) if pending else None
        if pending and worker is not None:
            try:
                await worker.call(
                    worker.ref.cancel_launch(pending[1]), what="cancel_launch", timeout=settings.worker_call_timeout()
                )
            except (XinferenceError, xo.ServerClosed, ConnectionError, OSError) as exc:
                logger.warning("could not tell worker %s to cancel %s: %s", worker.address, pending[1], exc)

    # -- terminating -------------------------------------------------------------------------------------------
    async def terminate(self, model_uid: str) -> None:
        async with self._lock:
            record = self._models.remove(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        self._models.changed()
        self._tombstones.add(record.launch_id, model_uid)  # a replica reported later is killed, not adopted
        if record.status == "launching":
            # its launch is still starting replicas: make it stop; it releases what it booked as it ends
            record.cancelled = True
            await self._cancel_pending(record)
        if not self.closing:
            self._history.forget(model_uid)  # terminated on purpose: it does not come back after a restart
        await self.stop_replicas(record, why=f"model {model_uid!r} was terminated")
        logger.info("model %s terminated", model_uid)

    async def stop_replicas(
        self, record: ModelRecord, replicas: list[Replica] | None = None, why: str = "stopped"
    ) -> None:
        """Stop ``replicas`` (default: all of the record's), each on its worker, all at once and each bounded. A
        replica leaves the record at once; its booking is released once its worker confirms it is gone. One whose
        worker did not answer stays booked (``stopping``): its process may still hold its GPUs, until the worker
        is declared gone or re-registers (and is told to kill it)."""
        targets = list(record.replicas if replicas is None else replicas)
        record.replicas = [r for r in record.replicas if r not in targets]
        for replica in targets:
            self._ledger.mark(replica.replica_uid, "stopping")
        await asyncio.gather(*(self._stop_replica(replica, why) for replica in targets))

    async def _stop_replica(self, replica: Replica, why: str) -> None:
        worker = self._workers.get(replica.worker_address)
        if worker is None:  # its worker is gone: what it held was released with it
            self._ledger.release(replica.replica_uid)
            return
        try:
            await worker.call(
                worker.ref.terminate_replica(replica.replica_uid, why),
                what="terminate_replica",
                timeout=settings.worker_call_timeout(),
            )
        except ModelNotFound:
            logger.warning("replica %s was already gone", replica.replica_uid)
        except (XinferenceError, xo.ServerClosed, ConnectionError, OSError) as exc:
            logger.warning(
                "worker %s did not stop replica %s (%s); it stays booked until the worker answers or is declared gone",
                worker.address,
                replica.replica_uid,
                exc,
            )
            return
        self._ledger.release(replica.replica_uid)

    async def shutdown(self) -> None:
        """Terminate every model (orderly shutdown of the whole cluster)."""
        self.closing = True  # autostart entries stay on: they come back at the next start
        for uid in self._models:
            with contextlib.suppress(XinferenceError):
                await self.terminate(uid)
