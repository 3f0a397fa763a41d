"""The one table of engines: user-facing name → adapter class, imported lazily.

Adding an engine is one line here plus its folder. Nothing registers itself on import.

The order of :data:`_ENGINES` is the preference used when a launch names no engine: the first engine whose
``match()`` accepts the model on the chosen worker (and whose library is installed) wins. GPU servers come first
(vLLM, then SGLang: the fastest where a CUDA GPU exists), then llama.cpp (GGUF anywhere), then Transformers, then
MLX, then sentence-transformers. ``match()`` rejects what cannot run here, so taking the first accepted engine gives
the best one available. MLX comes after Transformers because on Linux CPUs, where it is accepted once its env is
installed, it is the slower of the two (SmolLM2-135M on 2 cores: ~11-15 tok/s against ~21); on Apple silicon,
where it runs on the GPU (Metal) and Transformers on the CPU, :func:`engine_order` puts it before Transformers.

Embedding and rerank models have their own order (:data:`POOLED_ORDER`): vLLM where a CUDA GPU is, then
sentence-transformers, then llama.cpp. llama.cpp serves them only from GGUF files, and on a CPU its encoder was
slower than sentence-transformers on the same weights (``benchmark/results/embedding_engines.md``: all-MiniLM-L6-v2
at 16 concurrent requests); it is chosen when the family has GGUF weights only, or when asked for.

Audio models (speech-to-text) have :data:`AUDIO_ORDER`: faster-whisper, which runs CTranslate2 conversions of
Whisper (int8 on a CPU, float16 on CUDA).

Image models have :data:`IMAGE_ORDER`: diffusers, on CPUs and CUDA GPUs alike.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xinference.errors import InvalidRequest

if TYPE_CHECKING:
    from xinference.engines.base import Engine
    from xinference.hardware import HardwareInfo

__all__ = [
    "AUDIO_ORDER",
    "ENGINE_ORDER",
    "IMAGE_ORDER",
    "POOLED_ORDER",
    "engine_names",
    "engine_order",
    "get_engine_class",
    "resolve_engine_name",
]

#: name → "module:Class". The order is the preference used when a launch names no engine.
_ENGINES: dict[str, str] = {
    "vLLM": "xinference.engines.vllm.engine:VLLMEngine",
    "SGLang": "xinference.engines.sglang.engine:SGLangEngine",
    "llama.cpp": "xinference.engines.llama_cpp.engine:LlamaCppEngine",
    "Transformers": "xinference.engines.transformers.engine:TransformersEngine",
    "MLX": "xinference.engines.mlx.engine:MLXEngine",
    "sentence_transformers": "xinference.engines.sentence_transformers.engine:SentenceTransformersEngine",
    "faster_whisper": "xinference.engines.faster_whisper.engine:FasterWhisperEngine",
    "piper": "xinference.engines.piper.engine:PiperEngine",
    "hibari": "xinference.engines.hibari.engine:HibariEngine",
    "diffusers": "xinference.engines.diffusers.engine:DiffusersEngine",
}

ENGINE_ORDER: tuple[str, ...] = tuple(_ENGINES)
#: The preference for embedding and rerank models (engines that do not serve them are skipped by their match).
POOLED_ORDER: tuple[str, ...] = ("vLLM", "sentence_transformers", "llama.cpp")
#: The preference for audio models: speech-to-text on faster-whisper (CTranslate2) first, on CPUs and GPUs alike.
AUDIO_ORDER: tuple[str, ...] = ("faster_whisper",)
#: The preference for image models: image generation on diffusers.
IMAGE_ORDER: tuple[str, ...] = ("diffusers",)

#: GPU servers that also have a CPU build: on a worker without an NVIDIA GPU they are a fallback, tried right after
#: llama.cpp (GGUF, lighter and faster to start) instead of first.
_CPU_FALLBACKS: tuple[str, ...] = ("vLLM",)


def engine_order(hardware: HardwareInfo | None = None, model_type: str = "LLM") -> tuple[str, ...]:
    """The preference order on ``hardware``: :data:`ENGINE_ORDER`, except that on a worker without an NVIDIA GPU
    vLLM (its CPU build) comes after llama.cpp, and on Apple silicon MLX comes before Transformers. For embedding
    and rerank models, :data:`POOLED_ORDER` first (vLLM, its CPU build included, last on a worker without an
    NVIDIA GPU), then the rest; for audio models, :data:`AUDIO_ORDER` first; for image models, :data:`IMAGE_ORDER`."""
    base = ENGINE_ORDER
    if model_type == "audio":
        return AUDIO_ORDER + tuple(name for name in ENGINE_ORDER if name not in AUDIO_ORDER)
    if model_type == "image":
        return IMAGE_ORDER + tuple(name for name in ENGINE_ORDER if name not in IMAGE_ORDER)
    if model_type in ("embedding", "rerank"):
        base = POOLED_ORDER + tuple(name for name in ENGINE_ORDER if name not in POOLED_ORDER)
        if hardware is not None and not hardware.cuda_available:
            base = tuple(name for name in base if name not in _CPU_FALLBACKS) + _CPU_FALLBACKS
        return base
    if hardware is None:
        return base
    order = base
    if not hardware.cuda_available:
        rest = tuple(name for name in order if name not in _CPU_FALLBACKS)
        after = rest.index("llama.cpp") + 1
        order = rest[:after] + _CPU_FALLBACKS + rest[after:]
    if hardware.is_apple_silicon:
        rest = tuple(name for name in order if name != "MLX")
        before = rest.index("Transformers")
        order = rest[:before] + ("MLX",) + rest[before:]
    return order


def engine_names() -> list[str]:
    return list(_ENGINES)


def resolve_engine_name(name: str) -> str:
    """The canonical spelling of ``name`` (matching is case-insensitive); InvalidRequest lists the engines."""
    for known in _ENGINES:
        if known.lower() == name.strip().lower():
            return known
    raise InvalidRequest(f"unknown engine {name!r}; this platform has: {', '.join(_ENGINES)}", param="model_engine")


def get_engine_class(name: str) -> type[Engine]:
    """Import and return the adapter class for ``name``."""
    module_name, _, class_name = _ENGINES[resolve_engine_name(name)].partition(":")
    cls: type[Engine] = getattr(importlib.import_module(module_name), class_name)
    return cls
