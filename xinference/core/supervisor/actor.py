"""SupervisorActor: one per cluster; knows the workers, the catalog and every launched model.

It decides (which engine, which spec, which workers and GPUs), asks workers to start the replicas, and keeps the
model table the API's route cache is built from. It is never on the per-request path: the API calls model actors
directly and only asks the supervisor for routes when its table's ``version`` changed.

Its other concerns are mixins beside this module: workers joining, heartbeating and going silent, and the replica
events they report (``membership.py``), the catalog, the caches, engine environments, unload/load, autostart,
inspection and usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.background import BackgroundTasks
from xinference.core.launch import LaunchPlan
from xinference.core.ledger import Ledger
from xinference.core.placement import Placement
from xinference.core.refs import SUPERVISOR_UID
from xinference.core.supervisor.autostart import AutostartMixin
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.cache import CacheMixin
from xinference.core.supervisor.catalog import CatalogMixin
from xinference.core.supervisor.envs import EnvsMixin
from xinference.core.supervisor.inspect import InspectMixin
from xinference.core.supervisor.lifecycle import LifecycleMixin, launch_limits
from xinference.core.supervisor.membership import MembershipMixin
from xinference.core.supervisor.records import FOLLOWS_REPLICAS, LaunchRequest, ModelRecord, Replica, WorkerEntry
from xinference.core.supervisor.tombstones import Tombstones
from xinference.core.supervisor.usage import UsageMixin
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
from xinference.model.custom import RegistrationStore
from xinference.model.draft import plan_draft
from xinference.model.registry import ModelRegistry, SpecChoice
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["SupervisorActor"]

logger = logging.getLogger(__name__)


class SupervisorActor(MembershipMixin, CatalogMixin, CacheMixin, InspectMixin, EnvsMixin, LifecycleMixin,
                      AutostartMixin, UsageMixin, xo.StatelessActor):
    """The cluster's control plane. Created once, in the supervisor's (or ``xinference-local``'s) main pool."""

    def __init__(self, autostart_grace: float | None = None) -> None:
        """``autostart_grace``: seconds after start before autostart launches anything, so that workers that ran
        the models before a supervisor restart re-register them first (default: two heartbeats and a second;
        ``xinference-local`` passes 0, its worker starts with the supervisor and runs nothing yet)."""
        super().__init__()
        self._registry = ModelRegistry(store=RegistrationStore(settings.home_dir() / "registrations"))
        self._workers: dict[str, WorkerEntry] = {}
        self._models: dict[str, ModelRecord] = {}
        self._version = 0
        self._lock = asyncio.Lock()
        self._background = BackgroundTasks(logger)
        #: every replica's hold on GPUs and memory, booked before it starts (``core/ledger.py``)
        self._ledger = Ledger()
        self._booker = Booker(self._workers, self._ledger)
        #: this supervisor process's identity: a replica a worker reports from this incarnation whose launch is not
        #: running any more was terminated or failed here, and is killed
        self._incarnation = uuid.uuid4().hex
        self._tombstones = Tombstones(settings.home_dir() / "supervisor" / "tombstones.json")
        self._started = time.monotonic()
        self._autostart_grace = (2 * settings.heartbeat_interval() + 1.0) if autostart_grace is None \
            else autostart_grace

    @classmethod
    def default_uid(cls) -> str:
        return SUPERVISOR_UID

    async def __post_create__(self) -> None:
        self._background.spawn(self._watch_workers(), "watch-workers")

    async def __pre_destroy__(self) -> None:
        self._background.cancel_all()

    def _changed(self) -> None:
        self._version += 1

    # -- reading the cluster ---------------------------------------------------------------------------------------
    async def cluster_info(self) -> dict[str, Any]:
        return {
            "workers": await self.list_workers(),
            "models": {uid: [r.info() for r in rec.replicas] for uid, rec in self._models.items()},
            "route_version": self._version,
            "devices": self.devices(),
            "bookings": self._ledger.snapshot(),
        }

    async def model_events(self, model_uid: str) -> list[dict[str, Any]]:
        record = self._models.get(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        return list(record.events)

    # -- launching ---------------------------------------------------------------------------------------------
    async def launch_model(self, request: dict[str, Any], wait_ready: bool = True) -> dict[str, Any]:
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
        record.event("launching", f"{record.model_engine}, {record.choice.spec.model_format} "
                                  f"{record.choice.quantization}, {launch.replica} replica(s)")
        if not wait_ready:
            self._background.spawn(self._start_all(record, booked, keep_failed=True), f"launch-{record.model_uid}")
            return record.info()
        await self._start_all(record, booked, keep_failed=False)
        return record.info()

    def _decide(self, request: dict[str, Any], launch: LaunchRequest, limits: dict[str, Any],
                family: ModelFamily, choices: list[SpecChoice]) -> tuple[ModelRecord, list[str]]:
        """Engine, spec, workers and GPUs of a launch; registers its record (``launching``) with its replicas booked
        in the ledger. Called under ``self._lock``."""
        placements = self._booker.place(launch.replica, launch)
        hardware = self._booker.devices_for(placements[0])
        matched = choose_engine(launch.model_engine, choices, hardware)
        choice = matched.accepted[0]
        engine_cls = get_engine_class(matched.engine)
        # enable_mtp / draft_model_path are launch fields: a draft plan for every replica, not engine options
        launch.engine_kwargs, draft = plan_draft(self._registry, choice, matched.engine, engine_cls.config_class,
                                                 launch.engine_kwargs)
        engine_cls.parse_config(launch.engine_kwargs)  # a 400 naming the option before any process
        # what is wrong with the request itself comes first (above); then whether its uid is free
        uid = validate_model_name(launch.model_uid, "model_uid") if launch.model_uid else family.model_name
        if uid in self._models:
            hint = "" if launch.model_uid else "; pass model_uid to run another instance"
            raise ModelAlreadyExists(f"a model with uid {uid!r} is already running{hint}", param="model_uid")
        if self._ledger.of_model(uid):  # a terminated launch of this uid still has a replica loading or stopping
            raise ModelUnavailable(f"the previous model with uid {uid!r} is still stopping; retry in a moment",
                                   retry_after=2.0)
        record = ModelRecord(uid, choice, matched.engine, launch.replica, engine_kwargs=dict(launch.engine_kwargs),
                             hardware=hardware,
                             sources={"model_path": launch.model_path, "download_hub": launch.download_hub,
                                      "draft": draft},
                             launch=dict(request), limits=limits)
        placements = self._booker.sized(record, launch.replica, launch)
        record.hardware = self._booker.devices_for(placements[0])
        booked = self._booker.book(record, placements, check_memory=not launch.ignore_memory_check)
        self._models[uid] = record
        self._changed()
        return record, booked

    async def _start_all(self, record: ModelRecord, booked: list[str], keep_failed: bool) -> None:
        """Start the booked replicas one after the other; on any failure (or a terminate meanwhile) stop the ones
        started and release every booking of the launch."""
        began = time.monotonic()
        try:
            for replica_uid in booked:
                if record.cancelled:  # terminated (or cancelled) while an earlier replica was starting
                    raise LaunchFailed(f"the launch of {record.model_uid!r} was cancelled")
                await self._start_replica(record, replica_uid)
        except BaseException as exc:
            for replica_uid in booked:
                if not any(r.replica_uid == replica_uid for r in record.replicas):
                    self._ledger.release(replica_uid)  # never started, or its worker removed it when it failed
            await self._stop_replicas(record, why=f"the launch of model {record.model_uid!r} failed")
            reason = exc.message if isinstance(exc, XinferenceError) else type(exc).__name__
            record.event("launch_failed", reason)
            if keep_failed and not record.cancelled and not isinstance(exc, asyncio.CancelledError):
                record.status = "failed"
                logger.error("background launch of %s failed: %s", record.model_uid, reason.splitlines()[0])
            else:
                async with self._lock:
                    if self._models.get(record.model_uid) is record:  # a relaunch may hold the uid by now
                        self._models.pop(record.model_uid)
            self._changed()
            if not keep_failed or isinstance(exc, asyncio.CancelledError):
                raise
            return
        record.status = "ready"
        record.load_seconds = round(time.monotonic() - began, 3)
        record.event("ready", "every replica serves")
        self._changed()
        if record.launch:
            self._remember_launch(record.model_uid, record.launch, record.model_engine)
        logger.info("model %s ready (%s, %s)", record.model_uid, record.model_engine, record.choice.spec.model_format)

    async def _start_replica(self, record: ModelRecord, replica_uid: str) -> None:
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
            incarnation=self._incarnation,
            **record.sources,
        )
        record.pending = (worker.address, replica_uid)
        try:
            # no time limit (a download may take hours), but a worker declared gone ends the wait
            facts = await worker.call("launch_replica", plan.to_dict(), timeout=None)
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

    # -- scaling -----------------------------------------------------------------------------------------------
    async def add_replicas(self, model_uid: str, count: int = 1, n_gpu: int | str | None = "auto",
                           worker_ip: str | None = None) -> dict[str, Any]:
        """Start ``count`` more replicas of a running model, placed, checked and booked like a launch's."""
        record = self._get(model_uid)
        if count < 1:
            raise InvalidRequest("replica must be at least 1", param="replica")
        launch = LaunchRequest(model_name=record.choice.family.model_name, n_gpu=n_gpu, worker_ip=worker_ip)
        await self._booker.refresh(self._booker.candidates(launch, count))
        async with self._lock:
            if self._models.get(model_uid) is not record:
                raise ModelNotFound(f"model {model_uid!r} was terminated meanwhile", param="model_uid")
            if record.status not in FOLLOWS_REPLICAS:
                raise InvalidRequest(f"model {model_uid!r} is {record.status}; only a serving model gets more "
                                     "replicas", param="model_uid")
            placements = self._booker.sized(record, count, launch)
            booked = self._booker.book(record, placements,
                                       check_memory=not record.launch.get("ignore_memory_check", False))
        started = []
        try:
            for replica_uid in booked:
                await self._start_replica(record, replica_uid)
                record.replica += 1
                started.append(record.replicas[-1].info())
                self._changed()
        finally:
            for replica_uid in booked[len(started):]:
                self._ledger.release(replica_uid)
            record.refresh_status()
        return {"model_uid": model_uid, "replica": record.replica, "replicas": started}

    async def remove_replica(self, model_uid: str, replica_id: int) -> int:
        """Stop one replica (``<uid>-<replica_id>``); returns how many remain. The last one cannot go this way."""
        record = self._get(model_uid)
        replica_uid = f"{model_uid}-{replica_id}"
        target = next((r for r in record.replicas if r.replica_uid == replica_uid), None)
        if target is None:
            known = ", ".join(r.replica_uid.rsplit("-", 1)[1] for r in record.replicas)
            raise ModelNotFound(f"model {model_uid!r} has no replica {replica_id}; its replicas are: {known}",
                                param="replica_id")
        if len(record.replicas) == 1:
            raise InvalidRequest(f"{replica_uid} is the last replica; terminate the model instead", param="replica_id")
        record.replica -= 1
        await self._stop_replicas(record, [target], why=f"replica {replica_uid} was removed (scale-down)")
        record.event("replica_removed", f"{replica_uid} on {target.worker_address}")
        return len(record.replicas)

    async def launch_progress(self, model_uid: str) -> float:
        """0.0-1.0 for a model being launched (replicas done plus the current one's download), 1.0 once ready."""
        record = self._get(model_uid)
        if record.status != "launching":
            return 1.0
        current = 0.0
        pending = record.pending
        worker = self._workers.get(pending[0]) if pending else None
        if pending and worker is not None:
            with contextlib.suppress(XinferenceError):
                current = float(await worker.call("launch_progress", pending[1],
                                                  timeout=settings.worker_call_timeout()))
        return min((len(record.replicas) + current) / max(record.replica, 1), 1.0)

    async def cancel_launch(self, model_uid: str) -> None:
        """Stop a launch in progress: the download stops and the launch fails with "... was cancelled"."""
        record = self._get(model_uid)
        if record.status != "launching":
            raise InvalidRequest(f"model {model_uid!r} is already {record.status}; terminate it instead",
                                 param="model_uid")
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
                await worker.call("cancel_launch", pending[1], timeout=settings.worker_call_timeout())
            except (XinferenceError, xo.ServerClosed, ConnectionError, OSError) as exc:
                logger.warning("could not tell worker %s to cancel %s: %s", worker.address, pending[1], exc)

    # -- terminating -------------------------------------------------------------------------------------------
    async def terminate_model(self, model_uid: str) -> None:
        async with self._lock:
            record = self._models.pop(model_uid, None)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        self._changed()
        self._tombstones.add(record.launch_id, model_uid)  # a replica reported later is killed, not adopted
        if record.status == "launching":
            # its launch is still starting replicas: make it stop; it releases what it booked as it ends
            record.cancelled = True
            await self._cancel_pending(record)
        if not getattr(self, "_closing", False):
            self._forget_autostart(model_uid)  # terminated on purpose: it does not come back after a restart
        await self._stop_replicas(record, why=f"model {model_uid!r} was terminated")
        logger.info("model %s terminated", model_uid)

    async def _stop_replicas(self, record: ModelRecord, replicas: list[Replica] | None = None,
                             why: str = "stopped") -> None:
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
            await worker.call("terminate_replica", replica.replica_uid, why, timeout=settings.worker_call_timeout())
        except ModelNotFound:
            logger.warning("replica %s was already gone", replica.replica_uid)
        except (XinferenceError, xo.ServerClosed, ConnectionError, OSError) as exc:
            logger.warning("worker %s did not stop replica %s (%s); it stays booked until the worker answers or is "
                           "declared gone", worker.address, replica.replica_uid, exc)
            return
        self._ledger.release(replica.replica_uid)

    async def shutdown(self) -> None:
        """Terminate every model (orderly shutdown of the whole cluster)."""
        self._closing = True  # autostart entries stay on: they come back at the next start
        for uid in list(self._models):
            with contextlib.suppress(XinferenceError):
                await self.terminate_model(uid)

    # -- reading -----------------------------------------------------------------------------------------------
    def _get(self, model_uid: str) -> ModelRecord:
        record = self._models.get(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running or launching", param="model_uid")
        return record

    async def list_models(self) -> list[dict[str, Any]]:
        return [r.info() for r in self._models.values()]

    async def describe_model(self, model_uid: str) -> dict[str, Any]:
        return self._get(model_uid).info()

    async def get_routes(self) -> tuple[int, dict[str, dict[str, Any]]]:
        """(version, uid → route) for the API's cache; a model still launching is listed without replicas."""
        return self._version, {uid: r.route() for uid, r in self._models.items()}

    async def route_version(self) -> int:
        return self._version
