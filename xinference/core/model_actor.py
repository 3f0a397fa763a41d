"""ModelActor: one model replica, alone in its own subprocess, owning one engine adapter.

The API calls it directly (one actor hop per request; the supervisor is never on this path). Streams are pulled
in batches: ``open_stream`` starts a request and returns its first chunks, then each ``pull`` returns every chunk
produced since the previous one, so the per-message cost of a cross-process call is paid per batch, not per token.
A stream that nobody pulls for ``STALE_STREAM_SECONDS`` (its client vanished with the API) is aborted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.load_progress import LoadProgress
from xinference.engines.base import ChunkStream, Engine
from xinference.errors import EngineError, LaunchFailed, ModelUnavailable, WrongModelType, XinferenceError

__all__ = ["STALE_STREAM_SECONDS", "LaunchPlan", "ModelActor"]

logger = logging.getLogger(__name__)

STALE_STREAM_SECONDS = 120.0
#: How many reaped stream ids are remembered, so that a late pull gets an error rather than a clean end
_REAPED_MEMORY = 256
#: Environment variable the worker sets for the subprocess: where its stdout/stderr (engine output too) go.
LOG_ENV = "XINFERENCE_MODEL_LOG"


@dataclass
class LaunchPlan:
    """Everything a model subprocess needs to load one replica; built by the supervisor, sent as a dict."""

    model_uid: str
    replica_uid: str
    model_engine: str
    family: dict[str, Any]
    spec: dict[str, Any]
    quantization: str
    engine_config: dict[str, Any]
    hardware: dict[str, Any] = field(default_factory=dict)
    #: Local weights given at launch (override the spec's sources) and the hub chosen at launch, if any.
    model_path: str | None = None
    download_hub: str | None = None
    #: GPUs of the worker this replica may use (the worker sets the device visibility of the subprocess).
    gpu_indices: list[int] = field(default_factory=list)
    #: the draft model of speculative decoding, planned at launch (``model/draft.py``); None: no draft
    draft: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _OpenStream:
    stream: ChunkStream
    #: when the last pull began or ended; staleness counts from here, and never while a pull is in flight
    last_pull: float
    #: when the previous batch was handed out: the next one gathers chunks until ``stream_interval()`` later
    last_delivery: float = 0.0
    #: pulls in flight (waiting for tokens, e.g. queued behind max_num_seqs): such a stream is being read
    pulling: int = 0


def redirect_output_to(path: str) -> None:
    """Send this process's fds 1 and 2 (C libraries included) to ``path`` so crashes leave their last words."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )


_GENERATED = ("content", "reasoning_content", "tool_calls")


def _carries_text(batch: list[dict[str, Any]]) -> bool:
    """Whether a batch holds generated output (text, reasoning or tool-call deltas; not only the opening role
    chunk): from then on, pulls gather chunks for the stream interval."""
    for chunk in batch:
        for choice in chunk.get("choices") or ():
            if choice.get("text"):
                return True
            delta = choice.get("delta") or {}
            if any(delta.get(key) for key in _GENERATED):
                return True
    return False


async def _exit_when_orphaned(parent: int, interval: float = 1.0) -> None:
    """A model process outlives its worker only by accident (the worker was killed): then it exits, within about
    ``interval`` seconds, instead of holding memory and a GPU nobody can reach."""
    while True:
        await asyncio.sleep(interval)
        if os.getppid() != parent:
            logger.warning("the worker process %d is gone: this model process exits", parent)
            os._exit(0)


class ModelActor(xo.StatelessActor):
    """Serves one replica. Stateless in xoscar's sense: calls run concurrently, the engine does the batching."""

    def __init__(self, plan: dict[str, Any]) -> None:
        super().__init__()
        self._plan = LaunchPlan(**plan)
        self._engine: Engine | None = None
        self._streams: dict[str, _OpenStream] = {}
        #: ids of streams the reaper aborted (oldest first, bounded)
        self._reaped: dict[str, None] = {}
        self._ids = itertools.count()
        self._reaper: asyncio.Task[None] | None = None
        self._orphan_check: asyncio.Task[None] | None = None
        self._stream_interval = settings.stream_interval()
        self._load_progress = 0.0
        self._load_status = LoadProgress()
        #: the engine while its ``load`` runs: an engine with a ``stage`` (a managed server) tells where it is
        self._loading: Engine | None = None
        self._load_cancel = threading.Event()

    @classmethod
    def default_uid(cls) -> str:
        return "model"

    async def __post_create__(self) -> None:
        log_path = os.environ.get(LOG_ENV)
        if log_path:
            redirect_output_to(log_path)
        self._reaper = asyncio.create_task(self._reap_stale_streams())
        self._orphan_check = asyncio.create_task(_exit_when_orphaned(os.getppid()))

    async def __pre_destroy__(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        await self.unload()

    async def load(self) -> dict[str, Any]:
        """Find the weights and load the engine; returns what the engine resolved (for ``describe``)."""
        from xinference.core.hardware import HardwareInfo
        from xinference.engines.registry import get_engine_class
        from xinference.model.download import resolve_model_path
        from xinference.model.spec import ModelFamily, ModelSpec

        plan = self._plan
        started = time.monotonic()
        family = ModelFamily.model_validate(plan.family)
        spec = ModelSpec.model_validate(plan.spec)
        engine_cls = get_engine_class(plan.model_engine)
        path = await asyncio.to_thread(
            resolve_model_path, spec, plan.quantization, self._on_download, self._load_cancel,
            download_hub=plan.download_hub, model_path=plan.model_path, model_name=family.model_name,
            file_progress=self._load_status.update_file,
        )
        engine_config = dict(plan.engine_config)
        if plan.draft is not None:
            from xinference.model.draft import attach_draft

            draft = await asyncio.to_thread(attach_draft, plan.draft, self._on_download, self._load_cancel,
                                            plan.download_hub)
            engine_config["draft"] = draft.model_dump()
        if self._load_cancel.is_set():
            raise LaunchFailed(f"the launch of {plan.model_uid!r} was cancelled")
        self._load_progress = 1.0
        self._load_status.stage = f"loading into {plan.model_engine}"
        engine = engine_cls(
            model_uid=plan.model_uid,
            family=family,
            spec=spec,
            quantization=plan.quantization,
            model_path=path,
            config=engine_cls.parse_config(engine_config),
            hardware=HardwareInfo.model_validate(plan.hardware),
        )
        self._loading = engine
        try:
            await engine.load()
        finally:
            self._loading = None
        self._engine = engine
        self._load_status.stage = "ready"
        logger.info("%s loaded with %s in %.2fs", plan.replica_uid, plan.model_engine, time.monotonic() - started)
        resolved = getattr(engine, "resolved", None)
        return {"pid": os.getpid(), "engine_config": resolved.model_dump() if resolved is not None else {}}

    def _on_download(self, done: int, total: int) -> None:
        # Called from the download thread; a float store is atomic, the reader only ever sees a whole value.
        self._load_progress = min(done / total, 1.0) if total > 0 else 0.0
        self._load_status.update(done, total)

    async def load_status(self) -> dict[str, Any]:
        """Stage, bytes, speed and time left of ``load`` (see :mod:`xinference.core.load_progress`)."""
        status = self._load_status.snapshot()
        stage = getattr(self._loading, "stage", "") if self._loading is not None else ""
        if isinstance(stage, str) and stage:
            status["stage"] = stage  # e.g. "waiting for vLLM to load the model (12s): <its last log line>"
        return status

    async def progress(self) -> float:
        """How far ``load`` has come (0.0-1.0): the download fraction, 1.0 once the weights are local."""
        return 1.0 if self._engine is not None else self._load_progress

    async def cancel_load(self) -> None:
        """Stop a ``load`` that is still downloading: it raises LaunchFailed ("... was cancelled")."""
        self._load_cancel.set()

    async def unload(self) -> None:
        for entry in self._streams.values():
            entry.stream.cancel()
        self._streams.clear()
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.unload()

    def _ready(self) -> Engine:
        if self._engine is None:
            raise ModelUnavailable(f"model {self._plan.model_uid!r} is not loaded")
        return self._engine

    # -- requests ----------------------------------------------------------------------------------------------
    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._ready().chat(request)

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._ready().completions(request)

    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._ready().embed(request)

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._ready().rerank(request)

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """Prompt tokens of a chat request as the engine renders it (``/v1/messages/count_tokens``)."""
        return await self._ready().count_tokens(request)

    async def check_health(self) -> None:
        """Raise EngineError when the engine can no longer serve (polled by the worker for engines that check)."""
        if self._engine is not None:
            await self._engine.check_health()

    async def engine_stats(self) -> dict[str, Any]:
        """The engine's own counters (e.g. forward passes of a batching engine), for tests and diagnostics."""
        return self._ready().stats()

    async def open_stream(self, kind: str, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]], bool]:
        """Start a streamed ``chat`` or ``completions`` request; returns (stream id, first chunks, done).

        Errors that happen before the first chunk (a prompt too long, a bad parameter) are raised here, so the API
        can still answer with a proper status code.
        """
        engine = self._ready()
        if kind == "chat":
            stream = await engine.chat_stream(request)
        elif kind == "completions":
            stream = await engine.completions_stream(request)
        else:
            raise WrongModelType(f"unknown stream kind {kind!r}")
        batch, done = await stream.next_batch()
        stream_id = f"s{next(self._ids)}"
        if not done:
            now = time.monotonic()
            self._streams[stream_id] = _OpenStream(stream, now, now if _carries_text(batch) else 0.0)
        return stream_id, batch, done

    async def pull(self, stream_id: str) -> tuple[list[dict[str, Any]], bool]:
        """Every chunk produced since the last pull (waits for at least one); ``done`` ends the stream."""
        entry = self._streams.get(stream_id)
        if entry is None:
            if stream_id in self._reaped:
                raise EngineError(f"stream {stream_id} was aborted: it was not read for {STALE_STREAM_SECONDS:.0f}s")
            return [], True
        entry.last_pull = time.monotonic()
        entry.pulling += 1
        try:
            batch, done = await entry.stream.next_batch(not_before=entry.last_delivery + self._stream_interval)
            if _carries_text(batch):  # until the first token has gone out, nothing is held back
                entry.last_delivery = time.monotonic()
        except XinferenceError:
            self._streams.pop(stream_id, None)
            raise
        finally:
            entry.pulling -= 1
            entry.last_pull = time.monotonic()
        if done:
            self._streams.pop(stream_id, None)
        return batch, done

    async def abort(self, stream_id: str) -> bool:
        """Stop a stream (its client went away); the engine frees the slot at its next token."""
        entry = self._streams.pop(stream_id, None)
        if entry is None:
            return False
        entry.stream.cancel()
        return True

    async def _reap_stale_streams(self) -> None:
        while True:
            await asyncio.sleep(STALE_STREAM_SECONDS / 4)
            now = time.monotonic()
            for stream_id, entry in list(self._streams.items()):
                if not entry.pulling and now - entry.last_pull > STALE_STREAM_SECONDS:
                    logger.warning("aborting stream %s: not pulled for %.0fs", stream_id, now - entry.last_pull)
                    await self.abort(stream_id)
                    self._reaped[stream_id] = None
                    if len(self._reaped) > _REAPED_MEMORY:
                        del self._reaped[next(iter(self._reaped))]
