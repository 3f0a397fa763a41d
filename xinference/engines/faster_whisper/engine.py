"""Speech-to-text through faster-whisper: Whisper converted for CTranslate2 (int8 on a CPU, float16 on CUDA).

Concurrency: the model loads once with ``num_workers`` CTranslate2 workers, and each request runs on one thread of a
pool of ``num_workers + 2`` threads (:func:`pool_threads`). A request's thread does more than call CTranslate2: it
computes the log-mel features, runs the VAD, and between decoder calls splits segments, decodes tokens and aligns
words in Python. With only one thread per worker, a worker sat idle while its thread did that work, and the requests
waiting in the pool could not even start their features (``benchmark/compare_stt.py`` measured 0.86x raw
faster-whisper's requests/s at c=4). The two extra threads prepare the next requests while every worker decodes;
CTranslate2 queues their decoder calls until a worker frees up, so more threads would only hold more audio in
memory, not decode faster. Further requests wait in the pool's queue, inside the engine. The platform adds no queue
of its own.

Long audio (longer than ``vad_min_seconds``, 30 s by default) is cut into speech chunks by faster-whisper's Silero
VAD (``vad_filter``), so silences are skipped and no window straddles a pause.

Pytorch checkpoints (``openai/whisper-*``, a fine-tune saved by Transformers) are converted once with CTranslate2's
own converter (``TransformersConverter``, which needs transformers and torch) into
``XINFERENCE_HOME/cache/ctranslate2/<hash of the weights' folder>/``, stored as float16; later launches load that
conversion directly. So one engine serves both the ``ctranslate2`` and the ``pytorch`` specs of the catalog.

Audio reaches the engine already decoded by the API (float32 mono samples at 16 kHz), so a file that is not audio
is refused there with a 400 and never reaches the model process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.faster_whisper.config import FasterWhisperConfig, ResolvedFasterWhisperConfig
from xinference.engines.libraries import AUDIO_HINT
from xinference.errors import EngineError, InvalidRequest, LaunchFailed, ModelUnavailable, XinferenceError

if TYPE_CHECKING:
    from xinference.engines.memory import MemoryEstimate
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["SAMPLE_RATE", "FasterWhisperEngine", "conversion_dir", "pool_threads", "samples_of"]

logger = logging.getLogger(__name__)

#: Samples per second of the audio the engine takes (Whisper's own rate).
SAMPLE_RATE = 16_000
#: Files of a Transformers checkpoint that faster-whisper reads beside the converted weights (tokenizer, features)
_COPIED_FILES = ("tokenizer.json", "preprocessor_config.json")
#: Runtime memory besides the weights: CTranslate2's buffers, the decoder's cache per worker, the VAD model.
_OVERHEAD_BYTES = 300 * 1024**2
#: Pool threads beyond the CTranslate2 workers: they compute features and handle segments while the workers decode.
_EXTRA_THREADS = 2


def pool_threads(num_workers: int) -> int:
    """Threads of the engine's request pool for ``num_workers`` CTranslate2 workers (see the module docstring)."""
    return num_workers + _EXTRA_THREADS


@contextlib.contextmanager
def _backend_errors() -> Iterator[None]:
    """Translate what faster-whisper / CTranslate2 raise while serving into the platform's errors."""
    try:
        yield
    except XinferenceError:
        raise
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes an EngineError, chained
        raise EngineError(f"faster-whisper failed: {type(exc).__name__}: {exc}") from exc


def samples_of(audio: bytes) -> Any:
    """The float32 samples in ``audio`` (little-endian bytes) as the numpy array faster-whisper takes."""
    import numpy as np

    if len(audio) % 4:
        raise InvalidRequest("audio samples must be float32 (a multiple of 4 bytes)", param="file")
    return np.frombuffer(audio, dtype="<f4")


def conversion_dir(model_path: str) -> Path:
    """Where the CTranslate2 conversion of the pytorch checkpoint at ``model_path`` is kept (one per folder)."""
    from xinference import settings

    key = hashlib.sha256(os.path.realpath(model_path).encode()).hexdigest()[:16]
    return settings.cache_dir() / "ctranslate2" / key


def _folder_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


class FasterWhisperEngine(Engine):
    """Whisper (and models converted like it) on CTranslate2."""

    name: ClassVar[str] = "faster_whisper"
    model_types: ClassVar[frozenset[str]] = frozenset({"audio"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"ctranslate2", "pytorch"})
    config_class = FasterWhisperConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.resolved: ResolvedFasterWhisperConfig | None = None
        self._model: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._multilingual = True
        self._languages: frozenset[str] = frozenset()

    # -- fit ---------------------------------------------------------------------------------------------------

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        verdict = super().match(family, spec, hardware)
        if not verdict:
            return verdict
        if "audio2text" not in family.model_ability:
            return Verdict.reject(f"{cls.name} serves speech-to-text (audio2text) models only")
        if spec.model_format == "pytorch":
            for module, distribution in (("transformers", "transformers"), ("torch", "torch")):
                if importlib.util.find_spec(module) is None:
                    return Verdict.reject(
                        f"{cls.name} converts pytorch Whisper checkpoints to CTranslate2 with {distribution}, which "
                        "is not installed (pip install 'xinference[transformers]'); or launch the ctranslate2 spec"
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
        """The weights at the compute type they load in (int8 on a CPU: one byte a parameter; float16 on CUDA:
        two), or the size of the folder when it is already here, plus a fixed runtime allowance."""
        from xinference.engines.memory import MemoryEstimate, size_in_billions
        from xinference.model.download import bundled_path

        config = FasterWhisperConfig.model_validate(
            {k: v for k, v in engine_kwargs.items() if k in FasterWhisperConfig.model_fields}
        ).resolve(max(1, hardware.cpu_count), hardware.cuda_available)
        bytes_per_weight = 1.0 if config.compute_type.startswith("int8") else 4.0 if "32" in config.compute_type else 2
        weights = int(size_in_billions(spec) * 1e9 * bytes_per_weight)
        local: str | None = None
        with contextlib.suppress(XinferenceError, OSError):
            if spec.bundled is not None:
                local = bundled_path(spec.bundled)
            elif spec.model_uri is not None and spec.model_uri.startswith("file://"):
                local = spec.model_uri[len("file://") :]
        if local is not None and os.path.isdir(local):
            on_disk = _folder_bytes(local)
            # int8 loads stored float16/32 weights into fewer bytes; never count more than the files hold
            weights = min(on_disk, weights) if weights else on_disk
        return MemoryEstimate(weights=weights, kv_cache=0, overhead=_OVERHEAD_BYTES, context=0)

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, FasterWhisperConfig)
        from xinference.engines.sentence_transformers.config import usable_cores

        self.resolved = resolved = self.config.resolve(
            usable_cores(self.hardware.cpu_count), self.hardware.cuda_available
        )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local: the hub is never asked
        logger.info("loading %s with faster-whisper: %s", self.model_uid, resolved)
        self._pool = ThreadPoolExecutor(
            max_workers=pool_threads(resolved.num_workers), thread_name_prefix=f"whisper-{self.model_uid}"
        )
        loop = asyncio.get_running_loop()
        try:
            self._model = await loop.run_in_executor(self._pool, self._load_model, resolved)
        except ImportError as exc:
            raise LaunchFailed(f"faster_whisper needs faster-whisper and ctranslate2 ({AUDIO_HINT}): {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"faster-whisper could not load {self.model_uid}: {exc}") from exc
        self._multilingual = bool(self._model.model.is_multilingual)
        self._languages = _model_languages(self._model) if self._multilingual else frozenset({"en"})

    def _load_model(self, resolved: ResolvedFasterWhisperConfig) -> Any:
        from faster_whisper import WhisperModel

        path = self.model_path if self.spec.model_format == "ctranslate2" else self._converted()
        return WhisperModel(
            path,
            device=resolved.device,
            compute_type=resolved.compute_type,
            cpu_threads=resolved.cpu_threads,
            num_workers=resolved.num_workers,
            local_files_only=True,
        )

    def _converted(self) -> str:
        """The CTranslate2 conversion of the pytorch checkpoint at ``model_path``, made on first use (on the pool's
        thread: it loads the checkpoint with torch, seconds for tiny, minutes for large)."""
        from ctranslate2.converters import TransformersConverter

        target = conversion_dir(self.model_path)
        if (target / "model.bin").is_file():
            return str(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        copy = [name for name in _COPIED_FILES if os.path.isfile(os.path.join(self.model_path, name))]
        logger.info("converting %s to CTranslate2 (float16) into %s", self.model_path, target)
        staging = tempfile.mkdtemp(dir=target.parent, prefix=".convert-")
        try:
            TransformersConverter(self.model_path, copy_files=copy).convert(staging, quantization="float16", force=True)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return str(target)

    async def unload(self) -> None:
        self._model = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # -- serving -------------------------------------------------------------------------------------------------
    async def transcribe(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._whole(request, "transcribe")

    async def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        if not self._multilingual:
            raise InvalidRequest(
                f"model {self.model_uid!r} is English-only; translating needs a multilingual model "
                "(whisper-small, ...)",
                param="model",
            )
        return await self._whole(request, "translate")

    async def transcribe_stream(self, request: dict[str, Any]) -> ChunkStream:
        options = self._options(request, "transcribe")
        audio = samples_of(request["audio"])
        stream = ChunkStream()
        pool = self._ready_pool()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(pool, self._produce, audio, options, stream)
        future.add_done_callback(
            lambda f: (
                stream.finish(EngineError("the transcription was dropped: the model is unloading"))
                if f.cancelled()
                else None
            )
        )
        return stream

    async def _whole(self, request: dict[str, Any], task: str) -> dict[str, Any]:
        options = self._options(request, task)
        audio = samples_of(request["audio"])
        loop = asyncio.get_running_loop()
        with _backend_errors():
            return await loop.run_in_executor(self._ready_pool(), self._run, audio, options)

    def _ready_pool(self) -> ThreadPoolExecutor:
        if self._pool is None or self._model is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._pool

    def _options(self, request: dict[str, Any], task: str) -> dict[str, Any]:
        assert self.resolved is not None
        language = request.get("language") or None
        if language is not None:
            language = str(language).strip().lower()
            if language not in self._languages:
                known = "English only (en)" if not self._multilingual else "ISO-639-1 codes such as en, de, zh"
                raise InvalidRequest(
                    f"language {language[:20]!r} is not one {self.model_uid!r} knows; it takes {known}",
                    param="language",
                )
        temperature = request.get("temperature")
        audio_seconds = len(request["audio"]) / 4 / SAMPLE_RATE
        vad = self.resolved.vad_filter
        if vad == "auto":
            vad = audio_seconds > self.resolved.vad_min_seconds
        options: dict[str, Any] = {
            "language": language,
            "task": task,
            "beam_size": self.resolved.beam_size,
            "initial_prompt": request.get("prompt") or None,
            "word_timestamps": bool(request.get("word_timestamps")),
            "vad_filter": vad,
        }
        if temperature:  # OpenAI: 0 (or unset) lets the model raise the temperature by itself when decoding fails
            options["temperature"] = [float(temperature)]
        return options

    def _run(self, audio: Any, options: dict[str, Any]) -> dict[str, Any]:
        segments, info = self._model.transcribe(audio, **options)
        rows = [_segment(s, index) for index, s in enumerate(segments)]  # decoding happens while it is read
        words = [w for s in rows for w in s.pop("words")]
        return {
            "text": "".join(s["text"] for s in rows).strip(),
            "language": info.language,
            "duration": float(info.duration),
            "segments": rows,
            "words": words,
        }

    def _produce(self, audio: Any, options: dict[str, Any], stream: ChunkStream) -> None:
        """Push one chunk per recognised segment, then the whole text (on a pool thread)."""
        try:
            with _backend_errors():
                segments, info = self._model.transcribe(audio, **options)
                texts: list[str] = []
                for segment in segments:
                    if stream.cancelled:
                        return
                    texts.append(segment.text)
                    stream.push({"type": "segment", "text": segment.text, "start": segment.start, "end": segment.end})
                stream.push(
                    {
                        "type": "done",
                        "text": "".join(texts).strip(),
                        "language": info.language,
                        "duration": float(info.duration),
                    }
                )
            stream.finish()
        except BaseException as exc:  # noqa: BLE001 - the consumer gets the error after what was produced
            stream.finish(exc)

    def stats(self) -> dict[str, Any]:
        workers = self.resolved.num_workers if self.resolved else 0
        return {"workers": workers, "threads": pool_threads(workers) if workers else 0}


def _model_languages(model: Any) -> frozenset[str]:
    """The language codes a multilingual model has a token for: faster-whisper knows 100, but Whisper before
    large-v3 has 99 (no ``yue``), and a request for a language without a token would fail inside the decoder."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    tokenizer = model.hf_tokenizer
    return frozenset(code for code in _LANGUAGE_CODES if tokenizer.token_to_id(f"<|{code}|>") is not None)


def _segment(segment: Any, index: int) -> dict[str, Any]:
    """A segment as OpenAI's verbose_json has it (``id`` counts from 0 there; faster-whisper's from 1)."""
    words = [
        {"word": w.word, "start": round(float(w.start), 3), "end": round(float(w.end), 3)}
        for w in (segment.words or ())
    ]
    return {
        "id": index,
        "seek": int(segment.seek),
        "start": round(float(segment.start), 3),
        "end": round(float(segment.end), 3),
        "text": segment.text,
        "tokens": [int(t) for t in segment.tokens],
        "temperature": float(segment.temperature or 0.0),
        "avg_logprob": float(segment.avg_logprob),
        "compression_ratio": float(segment.compression_ratio),
        "no_speech_prob": float(segment.no_speech_prob),
        "words": words,
    }
