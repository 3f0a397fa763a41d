"""The base of the CPU text-to-speech engines: voices, the sentence loop, encoding and streaming.

A subclass loads its backend and synthesizes one sentence at a time (:meth:`SpeechEngine._sentences`, float32
mono samples); this base checks the request against the model's voices, runs synthesis on a thread pool (the
actor's event loop stays free; concurrent requests run side by side up to ``max_concurrent``), encodes with
:mod:`.encode`, and for a streamed request pushes each sentence's bytes as soon as it is encoded. A stream whose
client left stops before its next sentence.

Voice names: the model's own (``voices()``). OpenAI's built-in voice names (``alloy``, ``nova`` ...), which clients
send by default, mean the model's default voice unless the model has a voice of that name; any other name is a 400
listing the voices.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.speech.config import SpeechConfig
from xinference.engines.speech.encode import AudioEncoder
from xinference.errors import EngineError, InvalidRequest, LaunchFailed, ModelUnavailable, XinferenceError

if TYPE_CHECKING:
    import numpy as np

    from xinference.engines.memory import MemoryEstimate
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["OPENAI_VOICES", "SpeechEngine", "Voice"]

logger = logging.getLogger(__name__)

#: OpenAI's built-in voice names: a request naming one gets the model's default voice.
OPENAI_VOICES = frozenset(
    {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"}
)

Voice = dict[str, Any]


@contextlib.contextmanager
def _backend_errors(engine: str) -> Iterator[None]:
    try:
        yield
    except XinferenceError:
        raise
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes an EngineError, chained
        raise EngineError(f"{engine} failed: {type(exc).__name__}: {exc}") from exc


class SpeechEngine(Engine):
    """Text to speech on the CPU, one sentence at a time. Subclasses set ``name`` and ``architecture`` and
    implement ``check_lib``, ``_load_backend``, ``_voices``, ``_sample_rate`` and ``_sentences``."""

    model_types: ClassVar[frozenset[str]] = frozenset({"audio"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"onnx"})
    config_class = SpeechConfig
    #: the ``architectures`` entry of the catalog families this engine runs
    architecture: ClassVar[str]
    #: whether this engine's rejection of a model no engine here runs says why (:mod:`.unserved`); one engine
    #: does, so that a launch's list of reasons says it once
    explains_unserved: ClassVar[bool] = False

    _pool: ThreadPoolExecutor | None = None
    _loaded: bool = False

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        from xinference.engines.speech.unserved import UNSERVED_TTS

        for architecture in family.architectures:
            if cls.explains_unserved and family.model_type == "audio" and architecture in UNSERVED_TTS:
                return Verdict.reject(UNSERVED_TTS[architecture])
        verdict = super().match(family, spec, hardware)
        if not verdict:
            return verdict
        if "text2audio" not in family.model_ability:
            return Verdict.reject(f"{cls.name} only speaks text (text2audio); {family.model_name} is not a TTS model")
        if cls.architecture not in family.architectures:
            return Verdict.reject(
                f"{cls.name} runs {cls.architecture} voices only; {family.model_name} is "
                f"{', '.join(family.architectures) or 'another kind of model'}"
            )
        return Verdict.ok()

    @classmethod
    def estimate_memory(
        cls,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        engine_kwargs: dict[str, Any],
        hardware: HardwareInfo,
    ) -> MemoryEstimate:
        """The ONNX file plus onnxruntime's arena (about the file's size again) and a small runtime."""
        from xinference.engines.memory import MemoryEstimate, local_weights_bytes, size_in_billions

        weights = local_weights_bytes(spec, quantization) or int(size_in_billions(spec) * 4e9)
        return MemoryEstimate(weights=weights, kv_cache=weights, overhead=int(0.15 * 1024**3), context=0)

    # -- what subclasses provide -----------------------------------------------------------------------------
    @abc.abstractmethod
    def _load_backend(self) -> None:
        """Load the voice (on a pool thread); raise anything, it becomes LaunchFailed."""

    @abc.abstractmethod
    def _voices(self) -> list[Voice]:
        """The voices this model offers, the default first: ``{"id", "name", "language", ...}``."""

    @abc.abstractmethod
    def _sample_rate(self, voice: str) -> int:
        """Samples per second of ``voice``'s audio."""

    @abc.abstractmethod
    def _sentences(self, text: str, voice: str, speed: float) -> Iterator[np.ndarray]:
        """Float32 mono samples, one array per sentence, each yielded as soon as it is synthesized."""

    # -- life cycle ------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, SpeechConfig)
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        workers = self.config.max_concurrent or max(1, min(4, cores))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"tts-{self.model_uid}")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self._load_backend)
        except ImportError as exc:
            raise LaunchFailed(f"{self.name} is not installed ({exc}); pip install 'xinference[audio]'") from exc
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"{self.name} could not load {self.model_uid}: {exc}") from exc
        self._loaded = True
        logger.info("%s loaded %s with %d synthesis threads", self.name, self.model_uid, workers)

    async def unload(self) -> None:
        self._loaded = False
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _ready(self) -> ThreadPoolExecutor:
        if not self._loaded or self._pool is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._pool

    # -- serving ---------------------------------------------------------------------------------------------
    async def voices(self) -> list[Voice]:
        self._ready()
        return self._voices()

    def resolve_voice(self, requested: str | None) -> str:
        """The voice id to use for ``requested`` (see the module docstring); InvalidRequest lists the voices."""
        voices = self._voices()
        if not requested:
            return str(voices[0]["id"])
        for voice in voices:
            if str(voice["id"]).lower() == requested.strip().lower():
                return str(voice["id"])
        if requested.strip().lower() in OPENAI_VOICES:
            return str(voices[0]["id"])
        names = ", ".join(str(v["id"]) for v in voices)
        raise InvalidRequest(
            f"model {self.model_uid!r} has no voice {requested[:60]!r}; its voices are: {names} "
            "(OpenAI's voice names select the default voice)",
            param="voice",
        )

    def _prepare(self, request: dict[str, Any]) -> tuple[str, str, float, str]:
        text = str(request.get("input") or "")
        if not text.strip():
            raise InvalidRequest("input is empty: give the text to speak", param="input")
        voice = self.resolve_voice(request.get("voice"))
        speed = float(request.get("speed") or 1.0)
        fmt = str(request.get("response_format") or "mp3")
        return text, voice, speed, fmt

    async def speech(self, request: dict[str, Any]) -> bytes:
        """The whole audio file of ``request`` (``input``, ``voice``, ``response_format``, ``speed``)."""
        pool = self._ready()
        text, voice, speed, fmt = self._prepare(request)

        def run() -> bytes:
            with _backend_errors(self.name):
                encoder = AudioEncoder(fmt, self._sample_rate(voice), streaming=False)
                out = [encoder.add(samples) for samples in self._sentences(text, voice, speed)]
                out.append(encoder.close())
                return b"".join(out)

        return await asyncio.get_running_loop().run_in_executor(pool, run)

    async def speech_stream(self, request: dict[str, Any]) -> ChunkStream:
        """Start a streamed synthesis: chunks are ``{"audio": bytes}``, one per sentence as it is encoded (the
        first may be only a header), then the encoder's tail."""
        pool = self._ready()
        text, voice, speed, fmt = self._prepare(request)
        stream = ChunkStream()

        def run() -> None:
            try:
                with _backend_errors(self.name):
                    encoder = AudioEncoder(fmt, self._sample_rate(voice), streaming=True)
                    for samples in self._sentences(text, voice, speed):
                        if stream.cancelled:
                            return
                        data = encoder.add(samples)
                        if data:
                            stream.push({"audio": data})
                    tail = encoder.close()
                    if tail:
                        stream.push({"audio": tail})
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
                stream.finish(exc)
            else:
                stream.finish()

        asyncio.get_running_loop().run_in_executor(pool, run)
        return stream
