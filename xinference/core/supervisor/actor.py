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
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.background import BackgroundTasks
from xinference.core.hardware import HardwareInfo
from xinference.core.model_actor import LaunchPlan
from xinference.core.placement import Placement, parse_gpu_idx, place_replicas, worker_views
from xinference.core.supervisor.autostart import AutostartMixin
from xinference.core.supervisor.cache import CacheMixin
from xinference.core.supervisor.catalog import CatalogMixin
from xinference.core.supervisor.envs import EnvsMixin
from xinference.core.supervisor.inspect import InspectMixin
from xinference.core.supervisor.lifecycle import LifecycleMixin, launch_limits
from xinference.core.supervisor.membership import MembershipMixin
from xinference.core.supervisor.records import FOLLOWS_REPLICAS, LaunchRequest, ModelRecord, Replica, WorkerEntry
from xinference.core.supervisor.usage import UsageMixin
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
from xinference.model.matcher import choose_engine, match_engine
from xinference.model.memory import check_fit
from xinference.model.registry import ModelRegistry, SpecChoice
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["SupervisorActor"]

logger = logging.getLogger(__name__)


class SupervisorActor(MembershipMixin, CatalogMixin, CacheMixin, InspectMixin, EnvsMixin, LifecycleMixin,
                      AutostartMixin, UsageMixin, xo.StatelessActor):
    """The cluster's control plane. Created once, in the supervisor's (or ``xinference-local``'s) main pool."""

    def __init__(self) -> None:
        super().__init__()
        self._registry = ModelRegistry(store=RegistrationStore(settings.home_dir() / "registrations"))
        self._workers: dict[str, WorkerEntry] = {}
        self._models: dict[str, ModelRecord] = {}
        self._version = 0
        self._lock = asyncio.Lock()
        self._background = BackgroundTasks(logger)

    @classmethod
    def default_uid(cls) -> str:
        return "supervisor"

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
        limits = launch_limits(launch)  # keep_alive, max_queued, queue_timeout (issue 12)
        family = self._registry.get(launch.model_name, launch.model_type)
        choices = self._registry.choices(
            family, launch.model_format, launch.model_size_in_billions, launch.quantization
        )
        # Placement, the memory check and the uid are decided under the lock, and the record books the launch's
        # GPUs and memory before the lock is released: overlapping launches see each other's bookings.
        async with self._lock:
            record = await self._decide(request, launch, limits, family, choices)
        record.event("launching", f"{record.model_engine}, {record.choice.spec.model_format} "
                                  f"{record.choice.quantization}, {launch.replica} replica(s)")
        placements = [placement for placement, _ in record.reserved]
        if not wait_ready:
            self._background.spawn(self._start_all(record, placements, keep_failed=True),
                                   f"launch-{record.model_uid}")
            return record.info()
        await self._start_all(record, placements, keep_failed=False)
        return record.info()

    async def _decide(self, request: dict[str, Any], launch: LaunchRequest, limits: dict[str, Any],
                      family: ModelFamily, choices: list[SpecChoice]) -> ModelRecord:
        """Engine, spec, workers and GPUs of a launch; registers its record (``launching``) with those GPUs and
        the estimated memory booked. Called under ``self._lock``."""
        placements = self._place(launch.replica, launch)
        first = self._workers[placements[0].address]
        matched = choose_engine(launch.model_engine, choices, self._devices_for(first, placements[0]))
        choice = matched.accepted[0]
        engine_cls = get_engine_class(matched.engine)
        # enable_mtp / draft_model_path are launch fields: a draft plan for every replica, not engine options
        launch.engine_kwargs, draft = plan_draft(self._registry, choice, matched.engine, engine_cls.config_class,
                                                 launch.engine_kwargs)
        needed = engine_cls.gpus_needed(engine_cls.parse_config(launch.engine_kwargs))  # a 400 before any process
        if (needed and launch.n_gpu == "auto" and launch.gpu_idx is None and first.hardware.gpus
                and needed != len(placements[0].gpu_indices)):
            launch.n_gpu = needed  # tensor parallelism: each replica needs that many GPUs of its own
            placements = self._place(launch.replica, launch)
            first = self._workers[placements[0].address]
        for placement in placements[1:]:
            self._check_engine_fits(matched.engine, choice, placement)
        if not launch.ignore_memory_check:
            for address in dict.fromkeys(p.address for p in placements):
                await self._check_memory(self._workers[address], placements, choice, launch, matched.engine)
        uid = validate_model_name(launch.model_uid, "model_uid") if launch.model_uid else family.model_name

        record = ModelRecord(uid, choice, matched.engine, launch.replica, engine_kwargs=dict(launch.engine_kwargs),
                             hardware=self._devices_for(first, placements[0]),
                             sources={"model_path": launch.model_path, "download_hub": launch.download_hub,
                                      "draft": draft},
                             launch=dict(request), limits=limits)
        if uid in self._models:
            hint = "" if launch.model_uid else "; pass model_uid to run another instance"
            raise ModelAlreadyExists(f"a model with uid {uid!r} is already running{hint}", param="model_uid")
        for placement in placements:
            devices = self._devices_for(self._workers[placement.address], placement)
            need = engine_cls.estimate_memory(choice.family, choice.spec, choice.quantization, launch.engine_kwargs,
                                              devices).total
            record.reserved.append((placement, need))
        self._models[uid] = record
        self._changed()
        return record

    async def _start_all(self, record: ModelRecord, placements: list[Placement], keep_failed: bool) -> None:
        began = time.monotonic()
        try:
            for index, placement in enumerate(placements):
                if record.cancelled:  # terminated (or cancelled) while an earlier replica was starting
                    raise LaunchFailed(f"the launch of {record.model_uid!r} was cancelled")
                await self._start_replica(record, index, placement)
        except BaseException as exc:
            record.reserved.clear()
            await self._stop_replicas(record)
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

    def _place(self, replicas: int, launch: LaunchRequest) -> list[Placement]:
        if not self._workers:
            raise ModelUnavailable("no worker has joined this cluster yet")
        # started replicas and the ones launches have booked but not started yet, in one pass over the models
        held = [(r.worker_address, r.gpu_indices) for rec in self._models.values() for r in rec.replicas]
        held += [(p.address, p.gpu_indices) for rec in self._models.values() for p, _ in rec.reserved]
        views = worker_views(((w.address, w.hardware) for w in self._workers.values()), held)
        return place_replicas(views, replicas, launch.n_gpu, launch.worker_ip, parse_gpu_idx(launch.gpu_idx))

    @staticmethod
    def _devices_for(worker: WorkerEntry, placement: Placement) -> HardwareInfo:
        """The hardware one replica may use: only the GPUs placement gave it."""
        gpus = tuple(g for g in worker.hardware.gpus if g.index in placement.gpu_indices)
        return worker.hardware.model_copy(
            update={"gpus": gpus, "cuda_available": any(g.vendor == "nvidia" for g in gpus)}
        )

    def _check_engine_fits(self, engine: str, choice: SpecChoice, placement: Placement) -> None:
        found = match_engine(engine, [choice], self._devices_for(self._workers[placement.address], placement))
        if not found.ok:
            raise InvalidRequest(
                f"{engine} cannot run a replica on worker {placement.address}: {found.reason()}", param="worker_ip"
            )

    async def _check_memory(
        self, worker: WorkerEntry, placements: list[Placement], choice: SpecChoice, launch: LaunchRequest,
        engine: str,
    ) -> None:
        """Refuse a launch whose estimated memory exceeds what the worker has free right now, before any download
        or process (InvalidRequest with the numbers)."""
        try:
            worker.hardware = HardwareInfo.model_validate(await worker.ref.hardware())
        except Exception as exc:  # noqa: BLE001 - a worker that cannot report keeps its last known numbers
            logger.warning("worker %s did not report fresh hardware (%s); the memory check uses its last report",
                           worker.address, exc)
        mine = [p for p in placements if p.address == worker.address]
        problem = check_fit(
            choice.family, choice.spec, choice.quantization, self._devices_for(self._minus_booked(worker), mine[0]),
            launch.engine_kwargs, len(mine), engine=get_engine_class(engine),
        )
        if problem is not None:
            raise InvalidRequest(problem, param="ignore_memory_check")

    def _minus_booked(self, worker: WorkerEntry) -> WorkerEntry:
        """``worker`` with the memory booked by launches still loading on it taken off its free memory (their
        processes do not hold it yet, so the worker's own report does not show it)."""
        ram = 0
        vram: dict[int, int] = {}
        for record in self._models.values():
            for placement, need in record.reserved:
                if placement.address != worker.address:
                    continue
                if not placement.gpu_indices:
                    ram += need
                for index in placement.gpu_indices:
                    vram[index] = vram.get(index, 0) + need // len(placement.gpu_indices)
        if not ram and not vram:
            return worker
        gpus = tuple(g.model_copy(update={"memory_free_bytes": max(0, g.memory_free_bytes - vram.get(g.index, 0))})
                     for g in worker.hardware.gpus)
        hardware = worker.hardware.model_copy(
            update={"ram_free_bytes": max(0, worker.hardware.ram_free_bytes - ram), "gpus": gpus})
        return WorkerEntry(worker.address, worker.ref, hardware)

    async def _start_replica(self, record: ModelRecord, index: int, placement: Placement) -> None:
        worker = self._workers.get(placement.address)
        if worker is None:
            raise ModelUnavailable(f"worker {placement.address} left the cluster during the launch")
        choice = record.choice
        plan = LaunchPlan(
            model_uid=record.model_uid,
            replica_uid=f"{record.model_uid}-{index}",
            model_engine=record.model_engine,
            family=choice.family.model_dump(mode="json"),
            spec=choice.spec.model_dump(mode="json"),
            quantization=choice.quantization,
            engine_config=dict(record.engine_kwargs),
            hardware=self._devices_for(worker, placement).model_dump(mode="json"),
            gpu_indices=list(placement.gpu_indices),
            **record.sources,
        )
        record.pending = (worker.address, plan.replica_uid)
        record.next_index = max(record.next_index, index + 1)
        try:
            facts = await worker.ref.launch_replica(plan.to_dict())
        finally:
            record.pending = None
            booked = [i for i, (p, _) in enumerate(record.reserved) if p == placement]
            if booked:  # started or failed: from now on the replica itself (or nothing) holds the GPUs and memory
                del record.reserved[booked[0]]
        record.replicas.append(
            Replica(plan.replica_uid, worker.address, facts["address"], facts.get("pid"), placement.gpu_indices)
        )
        record.event("replica_started", f"{plan.replica_uid} on {worker.address}")
        if record.cancelled:
            raise LaunchFailed(f"the launch of {record.model_uid!r} was cancelled")
        record.engine_config = facts.get("engine_config", {})

    # -- scaling -----------------------------------------------------------------------------------------------
    async def add_replicas(self, model_uid: str, count: int = 1, n_gpu: int | str | None = "auto",
                           worker_ip: str | None = None) -> dict[str, Any]:
        """Start ``count`` more replicas of a running model, placed like a launch (fewest replicas first)."""
        record = self._get(model_uid)
        if record.status not in FOLLOWS_REPLICAS:
            raise InvalidRequest(f"model {model_uid!r} is {record.status}; only a serving model gets more replicas",
                                 param="model_uid")
        if count < 1:
            raise InvalidRequest("replica must be at least 1", param="replica")
        placements = self._place(count, LaunchRequest(model_name=record.choice.family.model_name, n_gpu=n_gpu,
                                                      worker_ip=worker_ip))
        for placement in placements:
            self._check_engine_fits(record.model_engine, record.choice, placement)
        started = []
        for placement in placements:
            await self._start_replica(record, record.next_index, placement)
            record.replica += 1
            started.append(record.replicas[-1].info())
            self._changed()
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
        record.replicas.remove(target)
        record.replica -= 1
        self._changed()
        worker = self._workers.get(target.worker_address)
        if worker is not None:
            with contextlib.suppress(XinferenceError):
                await worker.ref.terminate_replica(replica_uid)
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
                current = float(await worker.ref.launch_progress(pending[1]))
        return min((len(record.replicas) + current) / max(record.replica, 1), 1.0)

    async def cancel_launch(self, model_uid: str) -> None:
        """Stop a launch in progress: the download stops and the launch fails with "... was cancelled"."""
        record = self._get(model_uid)
        if record.status != "launching":
            raise InvalidRequest(f"model {model_uid!r} is already {record.status}; terminate it instead",
                                 param="model_uid")
        record.cancelled = True
        pending = record.pending
        worker = self._workers.get(pending[0]) if pending else None
        if pending and worker is not None:
            await worker.ref.cancel_launch(pending[1])
        logger.info("launch of %s cancelled", model_uid)

    # -- terminating -------------------------------------------------------------------------------------------
    async def terminate_model(self, model_uid: str) -> None:
        async with self._lock:
            record = self._models.pop(model_uid, None)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        self._changed()
        if record.status == "launching":
            # its launch is still starting replicas: make it stop and take back what it started
            record.cancelled = True
            record.reserved.clear()
            pending = record.pending
            worker = self._workers.get(pending[0]) if pending else None
            if pending and worker is not None:
                with contextlib.suppress(XinferenceError, xo.ServerClosed, ConnectionError, OSError):
                    await worker.ref.cancel_launch(pending[1])
        if not getattr(self, "_closing", False):
            self._forget_autostart(model_uid)  # terminated on purpose: it does not come back after a restart
        await self._stop_replicas(record)
        logger.info("model %s terminated", model_uid)

    async def _stop_replicas(self, record: ModelRecord) -> None:
        for replica in list(record.replicas):
            worker = self._workers.get(replica.worker_address)
            if worker is None:
                continue
            try:
                await worker.ref.terminate_replica(replica.replica_uid)
            except XinferenceError:
                logger.warning("replica %s was already gone", replica.replica_uid)
            except (xo.ServerClosed, ConnectionError, OSError):
                logger.warning("worker %s is unreachable; replica %s not stopped", worker.address,
                               replica.replica_uid)
        record.replicas.clear()

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
