"""The engine interface every backend adapter implements.

An engine adapter wraps one inference library (llama.cpp, Transformers, vLLM, ...) behind the same small surface,
so the model actor, the worker and the API never branch on the engine. Adding an engine means one new folder under
``engines/`` (``engine.py`` + ``config.py``) and one line in :mod:`xinference.engines.registry`.

Life cycle, inside the model's own subprocess::

    engine = EngineClass(model_uid=..., family=..., spec=..., model_path=..., config=..., hardware=...)
    await engine.load()            # raises LaunchFailed with the backend's own error text
    await engine.chat(request)     # one OpenAI-shaped response dict
    stream = await engine.chat_stream(request)
    batch, done = await stream.next_batch()   # every chunk produced since the last call
    stream.cancel()                # client went away: the backend stops at its next token and frees the slot
    stream.cancel(error)           # the platform ended it (unload, reaper): the consumer gets ``error`` last
    await engine.unload()

Requests arrive as plain dicts already validated by the API (OpenAI field names). Responses and chunks are
OpenAI-shaped dicts whose ``model`` is the model uid, never a file path, and which always carry ``usage`` on full
responses (and on the last chunk when ``stream_options.include_usage`` is set).

A streamed chunk (:data:`Chunk`) is either such a dict or ``bytes``: the JSON text of exactly that dict, already
final (model uid in place, our field names). An engine whose backend hands it JSON text (a managed server's SSE
payload, xllamacpp's bytes callback) pushes the text when it needs no change beyond cheap byte-level ones, so no
process on the way decodes and re-encodes every token: the API writes it as an SSE ``data:`` line as it is. A
consumer that needs the fields calls :func:`chunk_dict` / :func:`chunk_dicts`, which decode only there.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Union

from pydantic import BaseModel, ValidationError

from xinference.engines.verdict import Verdict
from xinference.errors import InvalidRequest, WrongModelType, XinferenceError

if TYPE_CHECKING:
    from xinference.engines.envs import EnvRecipe
    from xinference.engines.memory import MemoryEstimate
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["Chunk", "ChunkStream", "Engine", "Verdict", "chunk_dict", "chunk_dicts", "wait_any"]

logger = logging.getLogger(__name__)

#: One streamed chunk: an OpenAI-shaped dict, or the JSON text (UTF-8 bytes) of one, already final (see the module
#: docstring). Bytes cost nothing to hand across processes and are written to the client without a decode.
Chunk = Union[dict[str, Any], bytes]


def chunk_dict(chunk: Chunk) -> dict[str, Any]:
    """``chunk`` as a dict: decoded here when it is JSON text (a new dict each call: the caller may change it)."""
    if isinstance(chunk, bytes):
        decoded: dict[str, Any] = json.loads(chunk)
        return decoded
    return chunk


def chunk_dicts(chunks: Iterable[Chunk]) -> list[dict[str, Any]]:
    """Every chunk of ``chunks`` as a dict (see :func:`chunk_dict`), for the consumers that read fields."""
    return [json.loads(chunk) if isinstance(chunk, bytes) else chunk for chunk in chunks]


class ChunkStream:
    """A buffer between a producer (an engine thread, or a task) and one consumer pulling in batches.

    Why batches: a cross-process actor message costs hundreds of microseconds, so the model actor never sends one
    message per token. The producer pushes chunks as they come without ever waiting; each ``next_batch()`` (or
    ``take()``) returns everything produced since the previous call, and :func:`wait_any` lets one consumer wait on
    many streams at once (the model actor's ``pull_many``). ``push``/``finish`` are safe from any thread;
    ``next_batch``, ``take``, ``arm`` and ``cancel`` run on the actor's event loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._items: list[Chunk] = []
        self._waiter: asyncio.Future[None] | None = None
        self._finished = False
        self._error: BaseException | None = None
        self.cancelled = False
        self._on_cancel: list[Callable[[], Any]] = []

    def push(self, item: Chunk) -> None:
        """Add one chunk, a dict or its final JSON text (any thread). Ignored after ``finish``."""
        with self._lock:
            if self._finished:
                return
            self._items.append(item)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._wake(waiter)

    def finish(self, error: BaseException | None = None) -> None:
        """Mark the end of the stream (any thread); ``error`` is raised to the consumer after the buffered chunks.

        Only the first call counts.
        """
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._error = error
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._wake(waiter)

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        # On the loop's own thread (a producer task) the waiter is resolved at once; from an engine thread it is
        # handed to the loop, which costs a self-pipe write and a loop wake-up.
        if _running_loop() is self._loop:
            _wake(waiter)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_wake, waiter)

    def on_cancel(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` (on the actor's loop) when the stream is cancelled: the abort hook of a producer that
        can block without looking at ``cancelled`` (a task awaiting an upstream server, a queue). Runs at once
        when the stream is already cancelled."""
        if self.cancelled:
            callback()
        else:
            self._on_cancel.append(callback)

    def cancel(self, error: BaseException | None = None) -> None:
        """Ask the producer to stop (it checks ``cancelled`` before each token, and the hooks given to
        :meth:`on_cancel` interrupt it where it blocks) and end the stream.

        ``error`` is why, when the platform ends a stream its consumer still reads (the model is unloaded, the
        stream went unread): the consumer gets the chunks produced so far, then that error, so a cut answer never
        looks complete. None when the consumer itself left. A stream that had already ended keeps its own end."""
        if self.cancelled:
            return
        self.cancelled = True
        self.finish(error)
        hooks, self._on_cancel = self._on_cancel, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - one failing hook must not keep the others or the caller from going on
                logger.exception("an abort hook of a stream failed")

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def has_output(self) -> bool:
        """Whether ``take`` would return something now (chunks, or the end)."""
        return bool(self._items) or self._finished

    def arm(self, waiter: asyncio.Future[None]) -> bool:
        """Resolve ``waiter`` at the next push or at the end; returns True (and arms nothing) when there is already
        something to take. One waiter at a time: arming replaces the previous one."""
        with self._lock:
            if self._items or self._finished:
                return True
            self._waiter = waiter
            return False

    def disarm(self, waiter: asyncio.Future[None]) -> None:
        """Forget ``waiter`` if it is still armed (the consumer stopped waiting)."""
        with self._lock:
            if self._waiter is waiter:
                self._waiter = None

    def take(self) -> tuple[list[Chunk], bool] | None:
        """Without waiting: ``(chunks, done)`` when there is something, None when not yet.

        When the producer failed, the buffered chunks come first and the error is raised by the following call.
        """
        with self._lock:
            if self._items:
                batch, self._items = self._items, []
                return batch, self._finished and self._error is None
            if not self._finished:
                return None
            error, self._error = self._error, None
        if error is not None:
            raise error
        return [], True

    async def next_batch(self) -> tuple[list[Chunk], bool]:
        """Wait for at least one chunk or the end; return ``(chunks, done)`` (see ``take``)."""
        while True:
            taken = self.take()
            if taken is not None:
                return taken
            waiter = self._loop.create_future()
            if not self.arm(waiter):
                await waiter


async def wait_any(
    streams: Iterable[ChunkStream], timeout: float | None = None, waiter: asyncio.Future[None] | None = None
) -> None:
    """Return once at least one of ``streams`` has chunks or has ended, or after ``timeout`` seconds, or when
    ``waiter`` (a future of the caller's, which it may resolve itself to stop the wait early) is resolved.

    One future is armed on every stream, so a consumer of many streams (the model actor's ``pull_many``) waits
    with one await and is woken once, whichever stream moves first. The caller then ``take``s what is there.
    """
    loop = asyncio.get_running_loop()
    if waiter is None:
        waiter = loop.create_future()
    armed: list[ChunkStream] = []
    timer = None
    try:
        for stream in streams:
            if stream.arm(waiter):
                return
            armed.append(stream)
        if timeout is not None:
            timer = loop.call_later(timeout, _wake, waiter)
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
        for stream in armed:
            stream.disarm(waiter)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Engine(abc.ABC):
    """One backend adapter. Subclasses set the class flags and implement the abstract methods.

    Class flags (read by the matcher and the supervisor, which never test an engine's identity):

    - ``name``: the user-facing engine name (``llama.cpp``, ``Transformers``, ...).
    - ``model_types``: model types it serves (``LLM``, ``embedding``, ``rerank``, ``audio``, ``image``).
    - ``model_formats``: weight formats it loads.
    - ``continuous_batching``: whether concurrent requests share decoding steps.
    - ``config_class``: the pydantic model of its launch kwargs (``extra="forbid"``: a typo is a 400).
    """

    name: ClassVar[str]
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]]
    continuous_batching: ClassVar[bool] = False
    config_class: ClassVar[type[BaseModel]]
    #: The launch option that sets the context the engine allocates (``n_ctx``, ``max_model_len`` ...), if any.
    context_option: ClassVar[str | None] = None
    #: Whether what does not fit in VRAM stays usable in RAM (llama.cpp's CPU layers): memory fit counts both.
    spills_to_ram: ClassVar[bool] = False
    #: Whether a chat's images reach the model (a family with the ``vision`` ability): the catalog's check that every
    #: vision family has an engine that can see reads it. An engine without it still serves such a family's text.
    reads_images: ClassVar[bool] = False

    def __init__(
        self,
        *,
        model_uid: str,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        model_path: str,
        config: BaseModel,
        hardware: HardwareInfo,
    ) -> None:
        self.model_uid = model_uid
        self.family = family
        self.spec = spec
        self.quantization = quantization
        self.model_path = model_path
        self.config = config
        self.hardware = hardware

    # -- fit: called in the supervisor, before any process is started ------------------------------------------
    @classmethod
    def check_lib(cls) -> Verdict:
        """Is the backend library importable here, at a version this adapter supports? Must be cheap: the engine's
        entry in ``engines/libraries.py``, which answers without importing any adapter."""
        from xinference.engines.libraries import library_verdict_here

        return library_verdict_here(cls.name)

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        """Can this engine run ``spec`` of ``family`` on ``hardware``? The default checks type and format."""
        if family.model_type not in cls.model_types:
            return Verdict.reject(f"{cls.name} does not serve {family.model_type} models")
        if spec.model_format not in cls.model_formats:
            formats = ", ".join(sorted(cls.model_formats))
            return Verdict.reject(f"{cls.name} only runs {formats} weights, not {spec.model_format}")
        return Verdict.ok()

    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        """The packages this engine needs in an environment of its own on ``hardware`` (see
        :mod:`xinference.engines.envs`), or None when it runs from the main environment. Engines declare what they
        need, never how to install it."""
        return None

    @classmethod
    def process_env(cls, hardware: HardwareInfo) -> dict[str, str]:
        """Environment variables the model process must start with (read before any import, e.g. ``LD_PRELOAD``
        of a faster BLAS); set by the worker when it creates the process."""
        return {}

    @classmethod
    def gpus_needed(cls, config: BaseModel) -> int | None:
        """How many GPUs one replica launched with ``config`` needs (tensor parallelism), known before placement;
        None leaves it to the launch's ``n_gpu`` (by default: one per replica on a GPU worker)."""
        return None

    @classmethod
    def estimate_memory(
        cls,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        engine_kwargs: dict[str, Any],
        hardware: HardwareInfo,
    ) -> MemoryEstimate:
        """What one replica will take (weights + KV cache + runtime), checked against the worker's free memory
        before anything starts. The default sizes the KV cache from the context the launch asks for through
        ``context_option``; engines that reserve memory their own way (vLLM) override it."""
        from xinference.engines.memory import estimate_memory, launch_context, local_weights_bytes

        options = (cls.context_option,) if cls.context_option else ()
        return estimate_memory(
            family,
            spec,
            quantization,
            launch_context(family, engine_kwargs, options),
            on_gpu=hardware.cuda_available,
            weights_bytes=local_weights_bytes(spec, quantization),
        )

    @classmethod
    def parse_config(cls, kwargs: dict[str, Any]) -> BaseModel:
        """Validate launch kwargs into ``config_class``; InvalidRequest names the offending field."""
        try:
            return cls.config_class.model_validate(dict(kwargs))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "kwargs"
            if first["type"] == "extra_forbidden":
                known = ", ".join(sorted(cls.config_class.model_fields))
                message = f"{cls.name} does not take a launch option {field!r}; it accepts: {known}"
            else:
                message = f"invalid {cls.name} launch option {field!r}: {first['msg']}"
            raise InvalidRequest(message, param=field) from None

    # -- life cycle, in the model subprocess --------------------------------------------------------------------
    @abc.abstractmethod
    async def load(self) -> None:
        """Load the weights; raise LaunchFailed carrying the backend's error text."""

    @abc.abstractmethod
    async def unload(self) -> None:
        """Free everything ``load`` took; also called when ``load`` raised or was cancelled, to stop what it had
        started by then (so an engine records a thread or process before waiting on it). Must not raise."""

    # -- serving ------------------------------------------------------------------------------------------------
    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """One chat completion (``chat.completion`` dict)."""
        raise self._unsupported("chat")

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        """Start a streamed chat completion; chunks are ``chat.completion.chunk`` dicts."""
        raise self._unsupported("chat")

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        """One text completion (``text_completion`` dict)."""
        raise self._unsupported("generate")

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        """Start a streamed text completion."""
        raise self._unsupported("generate")

    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        """Embeddings of ``request["input"]`` (a list of strings or token-id lists): an OpenAI ``list`` dict of
        ``embedding`` objects with ``usage``. Engines of embedding models override this."""
        raise self._unsupported("embed")

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        """Scores of ``request["documents"]`` against ``request["query"]``, best first: ``{"id", "results":
        [{"index", "relevance_score", "document"}], "meta"}``. Engines of rerank models override this."""
        raise self._unsupported("rerank")

    async def transcribe(self, request: dict[str, Any]) -> dict[str, Any]:
        """Speech to text in the spoken language. ``request``: ``audio`` (bytes of float32 little-endian mono
        samples at 16 kHz, decoded by the API), ``language`` (ISO-639-1 or None to detect), ``prompt``,
        ``temperature``, ``word_timestamps``. Returns ``{"text", "language", "duration", "segments": [{"id", "seek",
        "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob"}],
        "words": [{"word", "start", "end"}]}`` (words only when asked for). Speech-to-text engines override this."""
        raise self._unsupported("transcribe audio")

    async def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Speech to English text: ``request`` and the answer as in :meth:`transcribe`."""
        raise self._unsupported("translate audio")

    async def transcribe_stream(self, request: dict[str, Any]) -> ChunkStream:
        """Start a streamed transcription (``request`` as in :meth:`transcribe`): one chunk per recognised
        segment, ``{"type": "segment", "text", "start", "end"}``, then ``{"type": "done", "text", "language",
        "duration"}``."""
        raise self._unsupported("transcribe audio")

    async def speech(self, request: dict[str, Any]) -> bytes:
        """The whole audio file speaking ``request["input"]`` (OpenAI's ``/v1/audio/speech`` fields: ``voice``,
        ``response_format``, ``speed``, ``instructions``). Engines of text-to-speech models override this."""
        raise self._unsupported("speak text")

    async def speech_stream(self, request: dict[str, Any]) -> ChunkStream:
        """Start a streamed synthesis of ``request``; chunks are ``{"audio": bytes}`` in play order, each sent as
        soon as a piece (a sentence) is encoded."""
        raise self._unsupported("speak text")

    async def voices(self) -> list[dict[str, Any]]:
        """The voices a text-to-speech model offers, its default first: ``{"id", "name", "language", ...}``."""
        raise self._unsupported("list voices")

    async def generate_images(self, request: dict[str, Any]) -> dict[str, Any]:
        """Images for ``request`` (checked by the API): ``task`` (``text2image``, ``image2image``, ``inpainting``),
        ``prompt``, ``negative_prompt``, ``n``, ``width`` and ``height`` (None: the model's default, or the input
        image's size), ``num_inference_steps``, ``guidance_scale``, ``seed`` (None: a random one), ``strength``,
        ``quality``, ``output_format`` (``png``, ``jpeg``, ``webp``), ``image`` and ``mask`` (PNG bytes, already
        decoded and checked by the API), ``request_id`` (for :meth:`request_progress`). Returns ``{"images": [bytes
        in output_format], "seed", "width", "height", "steps"}``. Image-generation engines override this; a
        cancelled call stops the generation between two steps."""
        raise self._unsupported("generate images")

    def request_progress(self, request_id: str) -> float | None:
        """How far the running request ``request_id`` has come (0.0-1.0), or None when it runs nowhere here.
        Engines whose requests take long enough to watch (image generation) override this."""
        return None

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """How many tokens the prompt of chat ``request`` (messages, tools, template kwargs) takes once the model's
        chat template has rendered it: what a chat call would report as ``prompt_tokens``, without generating.
        Used by ``/v1/messages/count_tokens``; chat engines override this."""
        raise self._unsupported("count tokens")

    async def check_health(self) -> None:
        """Called by the worker every few seconds while the replica serves; raise EngineError (saying what is wrong)
        when the engine can no longer answer: a managed server that died or hangs. In-process engines are as alive
        as their process, which the worker watches anyway, so the default does nothing."""
        return None

    def stats(self) -> dict[str, Any]:
        """Engine counters worth observing (batching engines report their forward passes); empty by default."""
        return {}

    def _unsupported(self, ability: str) -> XinferenceError:
        return WrongModelType(f"model {self.model_uid!r} served by {self.name} cannot {ability}")
