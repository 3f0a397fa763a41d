"""SupervisorActor: one per cluster; knows the workers, the catalog and every launched model.

It decides (which engine, which spec, which worker), asks a worker to start the replicas, and keeps the model
table the API's route cache is built from. It is never on the per-request path: the API calls model actors
directly and only asks the supervisor for routes when its table's ``version`` changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.hardware import HardwareInfo
from xinference.core.model_actor import LaunchPlan
from xinference.errors import (
    InvalidRequest,
    LaunchFailed,
    ModelAlreadyExists,
    ModelNotFound,
    ModelUnavailable,
    XinferenceError,
)
from xinference.model.custom import RegistrationStore
from xinference.model.download import local_path
from xinference.model.matcher import choose_engine
from xinference.model.registry import ModelRegistry, SpecChoice
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["LaunchRequest", "ModelRecord", "SupervisorActor"]

logger = logging.getLogger(__name__)


@dataclass
class LaunchRequest:
    """A validated launch, as the API hands it over (see ``api/protocol/models.py``)."""

    model_name: str
    model_type: str = "LLM"
    model_engine: str | None = None
    model_uid: str | None = None
    model_format: str | None = None
    model_size_in_billions: int | str | None = None
    quantization: str | None = None
    replica: int = 1
    n_gpu: int | str | None = "auto"
    engine_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Replica:
    replica_uid: str
    worker_address: str
    address: str
    pid: int | None = None


@dataclass
class _Worker:
    address: str
    ref: Any
    hardware: HardwareInfo


@dataclass
class ModelRecord:
    """One launched model and its replicas, as listed by ``GET /v1/models``."""

    model_uid: str
    choice: SpecChoice
    model_engine: str
    replica: int
    status: str = "launching"
    replicas: list[_Replica] = field(default_factory=list)
    engine_config: dict[str, Any] = field(default_factory=dict)
    hardware: HardwareInfo | None = None
    created: int = field(default_factory=lambda: int(time.time()))

    def info(self) -> dict[str, Any]:
        family, spec = self.choice.family, self.choice.spec
        return {
            "id": self.model_uid,
            "object": "model",
            "created": self.created,
            "owned_by": "xinference",
            "model_uid": self.model_uid,
            "model_type": family.model_type,
            "model_name": family.model_name,
            "model_lang": list(family.model_lang),
            "model_ability": list(family.model_ability),
            "model_description": family.model_description,
            "model_format": spec.model_format,
            "model_size_in_billions": spec.model_size_in_billions,
            "quantization": self.choice.quantization,
            "model_engine": self.model_engine,
            "model_hub": "bundled" if spec.bundled else "huggingface",
            "revision": spec.model_revision,
            "context_length": family.context_length,
            "replica": self.replica,
            "status": self.status,
            "address": self.replicas[0].worker_address if self.replicas else None,
            "accelerators": [],
            "engine_config": self.engine_config,
        }

    def route(self) -> dict[str, Any]:
        return {
            "model_type": self.choice.family.model_type,
            "model_ability": list(self.choice.family.model_ability),
            "status": self.status,
            "replicas": [r.address for r in self.replicas] if self.status == "ready" else [],
        }


class SupervisorActor(xo.StatelessActor):
    """The cluster's control plane. Created once, in the supervisor's (or ``xinference-local``'s) main pool."""

    def __init__(self) -> None:
        super().__init__()
        self._registry = ModelRegistry(store=RegistrationStore(settings.home_dir() / "registrations"))
        self._workers: dict[str, _Worker] = {}
        self._models: dict[str, ModelRecord] = {}
        self._version = 0
        self._lock = asyncio.Lock()

    @classmethod
    def default_uid(cls) -> str:
        return "supervisor"

    # -- workers -----------------------------------------------------------------------------------------------
    async def add_worker(self, address: str, hardware: dict[str, Any]) -> None:
        from xinference.core.worker import WorkerActor

        ref = await xo.actor_ref(address=address, uid=WorkerActor.default_uid())
        self._workers[address] = _Worker(address, ref, HardwareInfo.model_validate(hardware))
        logger.info("worker %s joined: %s", address, self._workers[address].hardware.summary())

    async def list_workers(self) -> list[dict[str, Any]]:
        return [{"address": w.address, "hardware": w.hardware.model_dump(mode="json")} for w in self._workers.values()]

    # -- models ------------------------------------------------------------------------------------------------
    async def launch_model(self, request: dict[str, Any]) -> dict[str, Any]:
        """Decide, place and start a model; returns its info once every replica serves."""
        launch = LaunchRequest(**request)
        worker = self._pick_worker()
        family = self._registry.get(launch.model_name, launch.model_type)
        choices = self._registry.choices(
            family, launch.model_format, launch.model_size_in_billions, launch.quantization
        )
        hardware = self._devices_for(worker, launch.n_gpu)
        matched = choose_engine(launch.model_engine, choices, hardware)
        from xinference.engines.registry import get_engine_class

        engine_cls = get_engine_class(matched.engine)
        engine_cls.parse_config(launch.engine_kwargs)  # a bad option is a 400 before any process starts
        uid = validate_model_name(launch.model_uid, "model_uid") if launch.model_uid else family.model_name
        if launch.replica < 1:
            raise InvalidRequest("replica must be at least 1", param="replica")

        record = ModelRecord(uid, matched.accepted[0], matched.engine, launch.replica, hardware=hardware)
        async with self._lock:
            if uid in self._models:
                hint = "" if launch.model_uid else "; pass model_uid to run another instance"
                raise ModelAlreadyExists(f"a model with uid {uid!r} is already running{hint}", param="model_uid")
            self._models[uid] = record
            self._version += 1
        try:
            for index in range(launch.replica):
                await self._start_replica(record, worker, index, launch.engine_kwargs)
        except BaseException:
            await self._stop_replicas(record)
            async with self._lock:
                self._models.pop(uid, None)
            raise
        record.status = "ready"
        self._version += 1
        logger.info("model %s ready (%s, %s)", uid, matched.engine, record.choice.spec.model_format)
        return record.info()

    async def _start_replica(self, record: ModelRecord, worker: _Worker, index: int, kwargs: dict[str, Any]) -> None:
        choice = record.choice
        plan = LaunchPlan(
            model_uid=record.model_uid,
            replica_uid=f"{record.model_uid}-{index}",
            model_engine=record.model_engine,
            family=choice.family.model_dump(mode="json"),
            spec=choice.spec.model_dump(mode="json"),
            quantization=choice.quantization,
            engine_config=dict(kwargs),
            hardware=record.hardware.model_dump(mode="json") if record.hardware else {},
        )
        facts = await worker.ref.launch_replica(plan.to_dict())
        record.replicas.append(_Replica(plan.replica_uid, worker.address, facts["address"], facts.get("pid")))
        record.engine_config = facts.get("engine_config", {})

    async def terminate_model(self, model_uid: str) -> None:
        async with self._lock:
            record = self._models.pop(model_uid, None)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        self._version += 1
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
        record.replicas.clear()

    # -- registrations -----------------------------------------------------------------------------------------
    async def register_model(self, model_type: str, family: dict[str, Any], persist: bool) -> None:
        parsed = ModelFamily.model_validate(family)
        if parsed.model_type.lower() != model_type.lower():
            raise InvalidRequest(
                f"the spec says model_type {parsed.model_type!r} but it was registered as {model_type!r}",
                param="model_type",
            )
        for spec in parsed.model_specs:
            if spec.model_uri is not None:
                try:
                    local_path(spec.model_uri)
                except LaunchFailed as exc:
                    raise InvalidRequest(exc.message, param="model_uri") from None
        self._registry.register(parsed, persist)
        logger.info("registered %s model %s (persist=%s)", parsed.model_type, parsed.model_name, persist)

    async def unregister_model(self, model_type: str, model_name: str) -> None:
        self._registry.unregister(model_name, model_type)
        logger.info("unregistered %s", model_name)

    async def list_registrations(self, model_type: str, detailed: bool) -> list[dict[str, Any]]:
        result = []
        for family in self._registry.list(model_type):
            entry: dict[str, Any] = {"model_name": family.model_name,
                                     "is_builtin": self._registry.is_builtin(family.model_name)}
            if detailed:
                entry.update(family.model_dump(mode="json"))
            result.append(entry)
        return result

    async def get_registration(self, model_type: str, model_name: str) -> dict[str, Any]:
        family = self._registry.get(model_name, model_type)
        return {**family.model_dump(mode="json"), "is_builtin": self._registry.is_builtin(model_name)}

    async def list_models(self) -> list[dict[str, Any]]:
        return [r.info() for r in self._models.values()]

    async def describe_model(self, model_uid: str) -> dict[str, Any]:
        record = self._models.get(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        return record.info()

    async def get_routes(self) -> tuple[int, dict[str, dict[str, Any]]]:
        """(version, uid → route) for the API's cache; a model still launching is listed without replicas."""
        return self._version, {uid: r.route() for uid, r in self._models.items()}

    async def route_version(self) -> int:
        return self._version

    async def shutdown(self) -> None:
        """Terminate every model (orderly shutdown of the whole cluster)."""
        for uid in list(self._models):
            try:
                await self.terminate_model(uid)
            except XinferenceError:
                pass

    @staticmethod
    def _devices_for(worker: _Worker, n_gpu: int | str | None) -> HardwareInfo:
        """The hardware a replica may use: ``n_gpu`` null or 0 hides the GPUs; a number needs that many."""
        hardware = worker.hardware
        if n_gpu is None or n_gpu == 0:
            return hardware.model_copy(update={"gpus": (), "cuda_available": False})
        if isinstance(n_gpu, int):
            if n_gpu > len(hardware.gpus):
                raise InvalidRequest(
                    f"n_gpu={n_gpu} asks for {n_gpu} GPU(s) but worker {worker.address} has {len(hardware.gpus)}; "
                    "use n_gpu='auto' or null for CPU",
                    param="n_gpu",
                )
            return hardware.model_copy(update={"gpus": hardware.gpus[:n_gpu]})
        return hardware

    def _pick_worker(self) -> _Worker:
        if not self._workers:
            raise ModelUnavailable("no worker has joined this cluster yet")
        return max(self._workers.values(), key=lambda w: w.hardware.ram_free_bytes)
