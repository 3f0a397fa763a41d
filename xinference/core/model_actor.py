"""ModelActor: one model replica, alone in its own subprocess, owning one engine adapter.

The API calls it directly (one actor hop per request; the supervisor is never on this path). Streams are pulled
in batches: ``open_stream`` starts a request and returns its first chunks, then the API's one pump per replica
calls ``pull_many`` with every stream it has open here and gets every chunk produced since its previous call, so
the per-message cost of a cross-process call is paid per round, shared by all streams, not per token and stream.
A round returns as soon as one stream has output; when several streams were producing, it waits a few
milliseconds more for the others (they decode in the same engine step) so that one message carries them all.
A stream that nobody pulls for ``XINFERENCE_STALE_STREAM_SECONDS`` (its API process froze or vanished) is ended.
An API on this host sends its rounds over the replica's stream channel instead (``stream_channel``: one local
socket, ``core/stream_channel.py``), answered by the same ``pull_many``.

The platform never ends a request silently: when it stops a replica (``stop_serving``, ``unload``, the actor's
destruction) or the reaper takes a stream, every open stream ends with a :class:`RequestInterrupted` naming why,
after the chunks it already produced, and a whole response in flight fails with it (503) instead of returning
what the engine had made so far.

Rounds are also spaced by the stream interval: none while the host has CPU to spare (every token goes out at
once), ``XINFERENCE_BUSY_STREAM_INTERVAL_MS`` while the engine keeps every core busy, so that the relay does not
take its CPU (``core/cpu_headroom.py``); ``XINFERENCE_STREAM_INTERVAL_MS`` fixes it instead.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

import xoscar as xo

from xinference import settings
from xinference.core.cpu_headroom import CpuHeadroom
from xinference.core.launch import LaunchPlan
from xinference.core.load_progress import LoadProgress
from xinference.core.refs import MODEL_UID, Pulled
from xinference.core.stream_channel import ChannelServer
from xinference.engines.base import Chunk, ChunkStream, Engine, wait_any
from xinference.errors import (
    EngineError,
    LaunchFailed,
    ModelUnavailable,
    ReplicaUnreachable,
    RequestInterrupted,
    WrongModelType,
    XinferenceError,
)

__all__ = ["GATHER_WINDOW_SECONDS", "PULL_WAIT_SECONDS", "STALE_STREAM_SECONDS", "ModelActor", "Pulled"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: the default of ``XINFERENCE_STALE_STREAM_SECONDS`` (see :func:`xinference.settings.stale_stream_seconds`)
STALE_STREAM_SECONDS = 120.0
#: How long a round of ``pull_many`` waits, once one stream has output, for the other streams that produced in the
#: previous round (the engine decodes them in the same step; their chunks arrive within about a millisecond)
GATHER_WINDOW_SECONDS = 0.004
#: A ``pull_many`` with nothing to hand out returns empty after this long (or after the shorter wait its caller
#: asks for), so its caller can look at its streams and knows the replica is alive even during a long prefill
PULL_WAIT_SECONDS = 10.0
#: How many stream ids ended by the platform are remembered, so that a late pull gets their error, not a clean end
_ENDED_MEMORY = 256
#: How long a stopping replica lets the pull rounds in flight hand their streams' errors over before it goes
_ANSWER_GRACE_SECONDS = 1.0
#: Environment variable the worker sets for the subprocess: where its stdout/stderr (engine output too) go.
LOG_ENV = "XINFERENCE_MODEL_LOG"


@dataclass
class _OpenStream:
    stream: ChunkStream
    #: when the last pull began or ended; staleness counts from here, and never while a pull is in flight
    last_pull: float
    #: pulls in flight (waiting for tokens, e.g. queued behind max_num_seqs): such a stream is being read
    pulling: int = 0
    #: whether the previous round handed out chunks of this stream: a round waits briefly for such streams
    producing: bool = False
    #: no round has handed out anything of this stream yet: its first text is not held back by the interval
    fresh: bool = True


def redirect_output_to(path: str) -> None:
    """Send this process's fds 1 and 2 (C libraries included) to ``path`` so crashes leave their last words."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )


#: How often a model process looks whether its worker still lives. A backstop: xoscar's sub pool already stops when
#: its main pool goes (it looks every 0.1 s). Each look wakes the process's event loop, ~0.2 ms of CPU on a busy
#: 2-core VM, which at 5 a second was 0.1% of a core taken from the engine; once a second costs a fifth of that.
ORPHAN_CHECK_SECONDS = 1.0


async def exit_when_orphaned(parent: int, interval: float = ORPHAN_CHECK_SECONDS) -> None:
    """A model process outlives its worker only by accident (the worker was killed): then it exits, within about
    ``interval`` seconds, instead of holding memory and a GPU nobody can reach."""
    while True:
        await asyncio.sleep(interval)
        if os.getppid() != parent:
            logger.warning("the worker process %d is gone: this model process exits", parent)
            os._exit(0)


async def _unload_failed(engine: Engine, replica_uid: str) -> None:
    """After ``engine.load()`` raised (or was cancelled): ``unload`` what it may have started (a decode thread
    holding the weights, a server process), since the replica will never serve and nothing else would stop it. A
    failing ``unload`` is logged, never raised over the load's own error."""
    try:
        await engine.unload()
    except BaseException:  # noqa: BLE001 - the load's error is the one the caller must see
        logger.warning("%s: unloading after a failed load failed too", replica_uid, exc_info=True)


class ModelActor(xo.StatelessActor):
    """Serves one replica. Stateless in xoscar's sense: calls run concurrently, the engine does the batching."""

    def __init__(self, plan: LaunchPlan) -> None:
        """``plan``: the replica's :class:`LaunchPlan`, as the worker sent it (pickled by xoscar)."""
        super().__init__()
        self._plan = plan
        self._engine: Engine | None = None
        self._streams: dict[str, _OpenStream] = {}
        #: streams still waiting for their first chunks in ``open_stream`` (not yet in ``_streams``)
        self._opening: set[ChunkStream] = set()
        #: streams the platform ended (reaper, stop) and why (oldest first, bounded)
        self._ended: dict[str, XinferenceError] = {}
        #: why this replica stops serving, once ``stop_serving`` (or ``unload``) was called
        self._stopping: RequestInterrupted | None = None
        #: whole-response engine calls in flight (``chat``, ``completions``, ...): a stop fails them with its reason
        self._calls: set[asyncio.Future[Any]] = set()
        #: ``pull_many`` rounds in flight
        self._pulls = 0
        #: the engine's last failed health check (the worker restarts such a replica)
        self._unhealthy: str | None = None
        self._stale_seconds = settings.stale_stream_seconds()
        self._ids = itertools.count()
        self._reaper: asyncio.Task[None] | None = None
        self._orphan_check: asyncio.Task[None] | None = None
        #: a fixed floor on the time between two rounds of ``pull_many`` (``XINFERENCE_STREAM_INTERVAL_MS``), or
        #: None: adaptive, ``_busy_interval`` while the host has no CPU to spare (``_headroom``), else none
        self._stream_interval = settings.stream_interval()
        self._busy_interval = settings.busy_stream_interval()
        self._headroom: CpuHeadroom | None = None
        self._last_round = 0.0
        #: futures of the ``pull_many`` calls waiting now; ``wake_pulls`` resolves them
        self._pull_waiters: set[asyncio.Future[None]] = set()
        self._load_progress = 0.0
        self._load_status = LoadProgress()
        #: the engine while its ``load`` runs: an engine with a ``stage`` (a managed server) tells where it is
        self._loading: Engine | None = None
        self._load_cancel = threading.Event()
        #: the local socket the API pulls rounds over (``stream_channel``), opened by the first API that asks
        self._channel: ChannelServer | None = None
        self._channel_opening = asyncio.Lock()

    @classmethod
    def default_uid(cls) -> str:
        return MODEL_UID

    async def __post_create__(self) -> None:
        log_path = os.environ.get(LOG_ENV)
        if log_path:
            redirect_output_to(log_path)
        self._reaper = asyncio.create_task(self._reap_stale_streams())
        self._orphan_check = asyncio.create_task(exit_when_orphaned(os.getppid()))

    async def __pre_destroy__(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        try:
            await self.unload()
        finally:
            if self._channel is not None:
                await self._channel.close()

    async def load(self) -> dict[str, Any]:
        """Find the weights and load the engine; returns what the engine resolved (for ``describe``)."""
        from xinference.engines.registry import get_engine_class
        from xinference.hardware import HardwareInfo
        from xinference.model.download import resolve_model_path
        from xinference.model.spec import ModelFamily, ModelSpec

        plan = self._plan
        started = time.monotonic()
        family = ModelFamily.model_validate(plan.family)
        spec = ModelSpec.model_validate(plan.spec)
        engine_cls = get_engine_class(plan.model_engine)
        path = await asyncio.to_thread(
            resolve_model_path,
            spec,
            plan.quantization,
            self._on_download,
            self._load_cancel,
            download_hub=plan.download_hub,
            model_path=plan.model_path,
            model_name=family.model_name,
            file_progress=self._load_status.update_file,
        )
        engine_config = dict(plan.engine_config)
        if plan.draft is not None:
            from xinference.model.draft import attach_draft

            draft = await asyncio.to_thread(
                attach_draft, plan.draft, self._on_download, self._load_cancel, plan.download_hub
            )
            engine_config["draft"] = draft.model_dump()
        if plan.projector is not None:
            from xinference.model.projector import resolve_projector

            engine_config["projector"] = await asyncio.to_thread(
                resolve_projector,
                spec,
                plan.projector,
                path,
                self._on_download,
                self._load_cancel,
                download_hub=plan.download_hub,
                model_path=plan.model_path,
                model_name=family.model_name,
                file_progress=self._load_status.update_file,
            )
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
        except BaseException:
            await _unload_failed(engine, plan.replica_uid)
            raise
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
        """Stage, bytes, speed and time left of ``load`` (see :mod:`xinference.core.load_progress`), and its
        ``progress`` (0.0-1.0, as :meth:`progress` gives it): one call tells the worker all it reports."""
        status = {**self._load_status.snapshot(), "progress": await self.progress()}
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

    async def stop_serving(self, reason: str) -> int:
        """End every request this replica serves with ``RequestInterrupted(reason)``; returns how many it ended.

        Whoever stops a replica calls this first and says why ("model X was unloaded", "replica X was removed
        (scale-down)", "replica X is restarting after a failed health check"): open streams end with that error
        after the chunks they already produced, whole responses in flight fail with it (503), and requests that
        arrive afterwards get a ReplicaUnreachable, which the API retries on another replica. Only the first
        reason counts. Destroying the actor without it still ends everything, with a reason of its own."""
        if self._stopping is None:
            self._stopping = RequestInterrupted(reason)
        error = self._stopping
        streams, self._streams = self._streams, {}
        for stream_id, entry in streams.items():
            entry.stream.cancel(error)
            self._remember(stream_id, error)
        for stream in self._opening:
            stream.cancel(error)
        calls = [call for call in self._calls if not call.done()]
        for call in calls:
            call.cancel()
        ended = len(streams) + len(self._opening) + len(calls)
        if ended:
            logger.warning("%s: ended %d request(s): %s", self._plan.replica_uid, ended, error.message)
        await self._let_pulls_answer()
        return ended

    async def _let_pulls_answer(self) -> None:
        """Wait (briefly) for the pull rounds in flight to return the errors just set, so that their answers leave
        this process before it is removed."""
        deadline = time.monotonic() + _ANSWER_GRACE_SECONDS
        while self._pulls and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)  # the actor pool writes a returned round's answer on the next turns of the loop

    def _stop_reason(self) -> str:
        """Why this replica stops when nobody said (the actor destroyed without ``stop_serving``)."""
        replica = self._plan.replica_uid
        if self._unhealthy is not None:
            return f"replica {replica} is restarting after a failed health check: {self._unhealthy}"
        return f"replica {replica} of model {self._plan.model_uid!r} was stopped"

    async def unload(self, reason: str | None = None) -> None:
        """End every request (:meth:`stop_serving`, with ``reason`` or the one given before) and unload the engine."""
        await self.stop_serving(reason or self._stop_reason())
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.unload()

    def _remember(self, stream_id: str, error: XinferenceError) -> None:
        self._ended[stream_id] = error
        if len(self._ended) > _ENDED_MEMORY:
            del self._ended[next(iter(self._ended))]

    def _ready(self) -> Engine:
        if self._stopping is not None:
            raise ReplicaUnreachable(f"replica {self._plan.replica_uid} is stopping: {self._stopping.message}")
        if self._engine is None:
            raise ModelUnavailable(f"model {self._plan.model_uid!r} is not loaded")
        return self._engine

    async def _whole(self, call: Callable[[Engine], Awaitable[T]]) -> T:
        """Run a whole-response engine call; a stop meanwhile fails it with the stop's reason (a 503), even when
        the engine returned something, since that may be an answer cut short."""
        work = asyncio.ensure_future(call(self._ready()))
        self._calls.add(work)
        try:
            result = await work
        except (Exception, asyncio.CancelledError):
            if self._stopping is not None:
                raise self._stopping from None
            raise
        finally:
            self._calls.discard(work)
        if self._stopping is not None:
            raise self._stopping
        return result

    # -- requests ----------------------------------------------------------------------------------------------
    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.chat(request))

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.completions(request))

    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.embed(request))

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.rerank(request))

    async def transcribe(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.transcribe(request))

    async def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(lambda engine: engine.translate(request))

    async def speech(self, request: dict[str, Any]) -> bytes:
        return await self._whole(lambda engine: engine.speech(request))

    async def voices(self) -> list[dict[str, Any]]:
        return await self._whole(lambda engine: engine.voices())

    async def generate_images(self, request: dict[str, Any]) -> dict[str, Any]:
        """Images of a text-to-image, image-to-image or inpainting request; cancelling the call (an abort, a
        client that left) stops the engine between two steps."""
        return await self._whole(lambda engine: engine.generate_images(request))

    async def request_progress(self, request_id: str) -> float | None:
        """How far the request ``request_id`` has come in the engine (0.0-1.0), None when it does not run here."""
        return self._engine.request_progress(request_id) if self._engine is not None else None

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """Prompt tokens of a chat request as the engine renders it (``/v1/messages/count_tokens``)."""
        return await self._whole(lambda engine: engine.count_tokens(request))

    async def check_health(self) -> None:
        """Raise EngineError when the engine can no longer serve (polled by the worker for engines that check).
        A failure is remembered: the worker restarts such a replica, and its streams then end naming why."""
        if self._engine is not None:
            try:
                await self._engine.check_health()
            except EngineError as exc:
                self._unhealthy = exc.message
                raise

    async def engine_stats(self) -> dict[str, Any]:
        """The engine's own counters (e.g. forward passes of a batching engine; read by ``/metrics``). Read on a
        thread: an engine may wait for its backend to answer (llama.cpp's counters wait up to one decoding step),
        and the streams this actor relays must not wait with it."""
        return await asyncio.to_thread(self._ready().stats)

    async def open_stream(self, kind: str, request: dict[str, Any]) -> tuple[str, list[Chunk], bool]:
        """Start a streamed ``chat``, ``completions`` or ``transcriptions`` request; returns (stream id, first
        chunks, done).

        Errors that happen before the first chunk (a prompt too long, a bad parameter) are raised here, so the API
        can still answer with a proper status code.
        """
        engine = self._ready()
        if kind == "chat":
            stream = await engine.chat_stream(request)
        elif kind == "completions":
            stream = await engine.completions_stream(request)
        elif kind == "transcriptions":
            stream = await engine.transcribe_stream(request)
        elif kind == "speech":
            stream = await engine.speech_stream(request)
        else:
            raise WrongModelType(f"unknown stream kind {kind!r}")
        if self._stopping is not None:  # stopped while the engine took the request
            stream.cancel(self._stopping)
        self._opening.add(stream)
        try:
            batch, done = await stream.next_batch()  # a stop meanwhile raises its reason here
        finally:
            self._opening.discard(stream)
        stream_id = f"s{next(self._ids)}"
        if not done:
            self._streams[stream_id] = _OpenStream(stream, time.monotonic())
        return stream_id, batch, done

    async def pull(self, stream_id: str) -> tuple[list[Chunk], bool]:
        """Every chunk of one stream produced since its last pull (waits for at least one); ``done`` ends it.

        ``pull_many`` of one stream, for callers that read a single stream.
        """
        batch, done, error = (await self.pull_many([stream_id]))[stream_id]
        if error is not None:
            raise error
        return batch, done

    async def pull_many(self, stream_ids: list[str], max_wait: float | None = None) -> dict[str, Pulled]:
        """One round for many streams: ``{stream_id: (chunks, done, error)}`` for each stream that has something.

        Waits until at least one stream has output or ended (at most ``max_wait`` seconds, by default
        ``PULL_WAIT_SECONDS``, then ``{}``; also ``{}`` when ``wake_pulls`` is called): a caller that puts a
        deadline on rounds asks for a wait well inside it, so a live replica always answers in time. A stream that
        fails is ended with its error in its own entry and the others go on. An id this actor does not know
        (already ended or aborted) comes back done; one the platform ended (reaper, stop) comes back with its error.
        """
        result: dict[str, Pulled] = {}
        entries: dict[str, _OpenStream] = {}
        for stream_id in stream_ids:
            entry = self._streams.get(stream_id)
            if entry is not None:
                entries[stream_id] = entry
            elif stream_id in self._ended:
                result[stream_id] = ([], True, self._ended[stream_id])
            elif self._stopping is not None:
                result[stream_id] = ([], True, self._stopping)
            else:
                result[stream_id] = ([], True, None)
        if not entries:
            return result
        now = time.monotonic()
        for entry in entries.values():
            entry.pulling += 1
            entry.last_pull = now
        self._pulls += 1
        try:
            if not result:
                await self._await_output(entries, PULL_WAIT_SECONDS if max_wait is None else max(0.0, max_wait))
            self._last_round = time.monotonic()
            for stream_id, entry in entries.items():
                pulled = self._take(stream_id, entry)
                if pulled is not None:
                    result[stream_id] = pulled
        finally:
            self._pulls -= 1
            now = time.monotonic()
            for entry in entries.values():
                entry.pulling -= 1
                entry.last_pull = now
        return result

    async def stream_channel(self) -> tuple[str, str] | None:
        """Where an API on this host pulls rounds without an xoscar call each: ``(socket path, token)``, or None
        when the channel is off or cannot open here (the API then keeps calling ``pull_many``)."""
        if not settings.stream_channel() or not hasattr(asyncio, "start_unix_server"):
            return None
        async with self._channel_opening:
            if self._channel is None:
                channel = ChannelServer(self.pull_many, self.abort)
                try:
                    await channel.start()
                except OSError as exc:
                    logger.warning("the stream channel did not open (rounds stay on xoscar): %s", exc)
                    await channel.close()
                    return None
                self._channel = channel
        return self._channel.path, self._channel.token

    def _round_interval(self) -> float:
        """The time between two rounds now: the fixed setting, or adaptive (see the module's docstring)."""
        if self._stream_interval is not None:
            return self._stream_interval
        if self._headroom is None:
            self._headroom = CpuHeadroom()
        return 0.0 if self._headroom.spare() else self._busy_interval

    async def wake_pulls(self) -> None:
        """End the ``pull_many`` rounds waiting now (they return what is there, maybe nothing): the API calls
        this when it opened a stream that its waiting round does not include."""
        for waiter in self._pull_waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _await_output(self, entries: dict[str, _OpenStream], wait: float) -> None:
        """Wait for the first output of a round, then (several streams producing) briefly for the others."""
        streams = [entry.stream for entry in entries.values()]
        waiter = asyncio.get_running_loop().create_future()
        self._pull_waiters.add(waiter)
        try:
            if not any(entry.fresh for entry in entries.values()):  # a new stream's first text goes out at once
                floor = self._last_round + self._round_interval() - time.monotonic()
                if floor > 0:
                    await asyncio.wait((waiter,), timeout=floor)
                    if waiter.done():
                        return  # wake_pulls: a new stream waits for a round that includes it
            await wait_any(streams, wait, waiter)
        finally:
            self._pull_waiters.discard(waiter)
        expected = sum(entry.producing for entry in entries.values())
        if expected < 2 or not any(stream.has_output for stream in streams):  # (woken by wake_pulls, timeout)
            return  # one stream, or one producing: every token goes out at once
        deadline = time.monotonic() + GATHER_WINDOW_SECONDS
        while True:
            quiet = [stream for stream in streams if not stream.has_output]
            left = deadline - time.monotonic()
            if not quiet or len(streams) - len(quiet) >= expected or left <= 0:
                return
            await wait_any(quiet, left)

    def _take(self, stream_id: str, entry: _OpenStream) -> Pulled | None:
        """What one stream has for this round (None: nothing yet); an ended or failed stream is dropped."""
        try:
            taken = entry.stream.take()
        except Exception as exc:  # noqa: BLE001 - one failing stream must not fail the round of the others
            self._streams.pop(stream_id, None)
            if not isinstance(exc, XinferenceError):
                logger.exception("stream %s failed", stream_id)
                exc = EngineError(f"the stream failed: {type(exc).__name__}: {exc}")
            return [], True, exc
        if taken is None:
            entry.producing = False
            return None
        batch, done = taken
        entry.producing = bool(batch)
        entry.fresh = False
        if not done and entry.stream.finished:
            # ended with an error after these chunks: hand both over in this round (the stream may be ending
            # because its replica stops, and there may be no later round)
            error = self._take(stream_id, entry)
            if error is not None:
                return batch, True, error[2]
        if done:
            self._streams.pop(stream_id, None)
        return batch, done, None

    async def abort(self, stream_id: str) -> bool:
        """Stop a stream (its client went away); the engine frees the slot at its next token."""
        entry = self._streams.pop(stream_id, None)
        if entry is None:
            return False
        entry.stream.cancel()
        return True

    async def _reap_stale_streams(self) -> None:
        """End, with an error naming why, every stream the API has not read for ``XINFERENCE_STALE_STREAM_SECONDS``
        (never one whose pull is in flight: it is read, only waiting for tokens), so that the engine stops
        generating for nobody, and an API that comes back finds out that the answer was cut."""
        while True:
            await asyncio.sleep(self._stale_seconds / 4)
            now = time.monotonic()
            for stream_id, entry in list(self._streams.items()):
                idle = now - entry.last_pull
                if entry.pulling or idle <= self._stale_seconds:
                    continue
                logger.warning("ending stream %s: not pulled for %.0fs", stream_id, idle)
                error = RequestInterrupted(
                    f"stream {stream_id} of model {self._plan.model_uid!r} was not read for {idle:.0f} s and was ended"
                )
                self._streams.pop(stream_id, None)
                entry.stream.cancel(error)
                self._remember(stream_id, error)
