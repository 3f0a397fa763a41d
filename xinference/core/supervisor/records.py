"""The supervisor's data: launch requests, workers, model records and their events."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xinference.core.launch import LaunchRequest, slots_of
from xinference.core.refs import WorkerRef
from xinference.engines.base import Engine
from xinference.engines.registry import get_engine_class
from xinference.errors import ModelUnavailable
from xinference.hardware import HardwareInfo
from xinference.model.registry import SpecChoice

T = TypeVar("T")

__all__ = ["LaunchRequest", "ModelRecord", "Replica", "WorkerEntry", "Workers"]

#: Events kept per model (``GET /v1/models/{uid}/events``).
MAX_EVENTS = 200
#: Statuses that ``ModelRecord.refresh_status`` derives from the replicas.
FOLLOWS_REPLICAS = frozenset({"ready", "degraded", "unavailable"})


@dataclass
class Replica:
    """One running copy of a model, in a subprocess of ``worker_address``."""

    replica_uid: str
    worker_address: str
    address: str
    pid: int | None = None
    gpu_indices: tuple[int, ...] = ()

    def info(self) -> dict[str, Any]:
        return {
            "replica_uid": self.replica_uid,
            "worker_address": self.worker_address,
            "address": self.address,
            "pid": self.pid,
            "gpu_indices": list(self.gpu_indices),
        }


@dataclass
class WorkerEntry:
    """A worker as the supervisor knows it; ``last_seen`` moves with every heartbeat, ``gone`` is set when the
    supervisor forgets it (silent too long, or it left)."""

    address: str
    ref: WorkerRef
    hardware: HardwareInfo
    #: the ledger's epoch when ``hardware`` was asked for (or arrived, for a heartbeat): see ``Ledger.loading``
    hardware_epoch: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    joined: float = field(default_factory=time.time)
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    async def call(self, request: Awaitable[T], *, timeout: float | None, what: str) -> T:
        """Await ``request``, a call on ``self.ref`` named ``what`` (``worker.call(worker.ref.usage(), timeout=2,
        what="usage")``: typed through :class:`~xinference.core.refs.WorkerRef`), ended with ModelUnavailable when
        the worker does not answer within ``timeout`` seconds (None: no time limit, for a launch that may download
        for hours) or is declared gone meanwhile (its heartbeats stopped: a host lost without a connection reset
        never answers)."""
        call = asyncio.ensure_future(request)
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            done, _ = await asyncio.wait({call, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        finally:
            gone.cancel()
        if call in done:
            return call.result()
        call.cancel()
        why = "left the cluster" if gone in done else f"did not answer {what} within {timeout:g} s"
        raise ModelUnavailable(f"worker {self.address} {why}", retry_after=5.0)

    def info(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "hardware": self.hardware.model_dump(mode="json"),
            "summary": self.hardware.summary(),
            "seconds_since_heartbeat": round(time.monotonic() - self.last_seen, 1),
        }


@dataclass
class ModelRecord:
    """One launched model and its replicas, as listed by ``GET /v1/models``."""

    model_uid: str
    choice: SpecChoice
    model_engine: str
    replica: int
    status: str = "launching"
    replicas: list[Replica] = field(default_factory=list)
    engine_config: dict[str, Any] = field(default_factory=dict)
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    hardware: HardwareInfo | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    #: ``model_path`` / ``download_hub`` / ``draft`` (``model/draft.py``) / ``projector`` (``model/projector.py``) of
    #: the launch, handed to every replica's LaunchPlan.
    sources: dict[str, Any] = field(default_factory=dict)
    #: (worker address, replica uid) of the replica being started right now; set while launching.
    pending: tuple[str, str] | None = None
    cancelled: bool = False
    #: this launch's identity: its replicas carry it, so a worker that reports a replica after a partition or a
    #: supervisor restart is told to keep it only when it belongs to the launch that holds the uid now. A reload
    #: after a keep-alive unload is the same launch.
    launch_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: index of the next replica started (replica uids are ``<uid>-<index>`` and never reused)
    next_index: int = 0
    #: the launch request as given (re-placing replicas after a keep-alive unload, autostart after a restart)
    launch: dict[str, Any] = field(default_factory=dict)
    #: keep_alive (seconds, None: forever), max_queued, queue_timeout: read by the API's admission and keep-alive
    limits: dict[str, Any] = field(default_factory=dict)
    #: seconds the last (re)load of every replica took
    load_seconds: float | None = None
    #: the engine's adapter class and its parsed options, resolved once per launch (placement, the memory check and
    #: the booking of every replica read them); see :meth:`engine`
    _engine: tuple[type[Engine], Any] | None = field(default=None, repr=False, compare=False)
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))

    def engine(self) -> tuple[type[Engine], Any]:
        """(adapter class, parsed engine options) of this model: looked up and parsed the first time, then kept.
        ``engine_kwargs`` do not change after the launch decided them."""
        if self._engine is None:
            cls = get_engine_class(self.model_engine)
            self._engine = (cls, cls.parse_config(self.engine_kwargs))
        return self._engine

    def event(self, kind: str, message: str) -> None:
        self.events.append({"time": time.time(), "event": kind, "message": message})

    def refresh_status(self) -> str:
        """Derive the status from the replicas after one joined or left (worker lost, process died, restarted,
        adopted, scaled): ``ready`` with every wanted replica serving, ``degraded`` with some, ``unavailable`` with
        none. Only a serving model follows its replicas this way; ``launching``, ``failed``, ``unloading`` and
        ``unloaded`` belong to the flow that set them and are kept. Returns the status."""
        if self.status in FOLLOWS_REPLICAS:
            if not self.replicas:
                self.status = "unavailable"
            else:
                self.status = "ready" if len(self.replicas) >= self.replica else "degraded"
        return self.status

    def info(self) -> dict[str, Any]:
        family, spec = self.choice.family, self.choice.spec
        hub = "bundled" if spec.bundled else "local" if spec.model_uri else "huggingface"
        info: dict[str, Any] = {
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
            "model_hub": hub,
            "revision": spec.model_revision,
            "context_length": family.context_length,
            "tool_call_format": family.tool_call_format,
            "reasoning_tags": [family.reasoning_start_tag, family.reasoning_end_tag]
            if family.reasoning_start_tag
            else None,
            "replica": self.replica,
            "status": self.status,
            "address": self.replicas[0].worker_address if self.replicas else None,
            "replicas": [r.info() for r in self.replicas],
            "accelerators": sorted({f"{r.worker_address}/gpu{i}" for r in self.replicas for i in r.gpu_indices}),
            "engine_config": self.engine_config,
            "keep_alive": self.limits.get("keep_alive_text", "forever"),
            "autostart": bool(self.launch.get("autostart")),
            "mcp_servers": self.limits.get("mcp_servers"),
            "load_seconds": self.load_seconds,
        }
        if family.model_type != "LLM":
            # Xinference describes embedding models with these; Dify sizes its text chunks by max_tokens (512
            # when absent, more than all-MiniLM-L6-v2 reads)
            info["max_tokens"] = family.max_tokens
            if family.model_type == "embedding":
                info["dimensions"] = family.dimensions
        return info

    def route(self) -> dict[str, Any]:
        serving = self.status in ("ready", "degraded")
        return {
            "model_type": self.choice.family.model_type,
            "model_ability": list(self.choice.family.model_ability),
            "status": self.status,
            "replicas": [r.address for r in self.replicas] if serving else [],
            "model_engine": self.model_engine,
            "limits": {**self.limits, "slots": slots_of(self.engine_config)},
        }


#: The supervisor's worker table (address -> entry): one dict, shared by every part that reads or changes it.
Workers = dict[str, WorkerEntry]
