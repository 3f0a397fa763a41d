"""Will a model fit? A rough, pure estimate of the memory a launch needs, checked before anything is started.

The supervisor calls :func:`check_fit` after choosing the engine and the worker, and before the worker is asked to
fetch weights or start a process: a model that cannot fit is refused in milliseconds with a sentence saying how
much it needs and how much the worker has, instead of after a long download and an out-of-memory kill. Users who
know better pass ``ignore_memory_check=true`` at launch.

The estimate is weights + KV cache for the context the engine will allocate + a fixed runtime overhead:

- **weights**: the GGUF file's size when it is already on this machine (bundled package, ``file://`` path);
  otherwise parameters × bytes per parameter of the format and quantization (``Q4_K_M`` ≈ 4.85 bits, AWQ/GPTQ
  Int4 ≈ 4.5 bits with scales, FP8 8 bits, unquantized 16 bits).
- **KV cache**: bytes per token × context tokens, in 16-bit. The catalog does not carry layer and head counts, so
  the bytes per token come from the size, fitted to grouped-query-attention models (Llama 3.x, Qwen2.5, Mistral):
  ~36 KiB × billions^0.6 (8B → ~125 KiB/token, the real Llama-3.1-8B value is 128 KiB). It errs on the high side
  for small models, which is the safe side.
- **context**: what the launch asks for (``n_ctx``, ``max_model_len``, ``context_length``), else the model's own
  capped at 8192, the default the engines size their cache to.

Memory that counts: free RAM on a CPU worker and on Apple silicon (unified memory); free VRAM of the GPUs given to
the replica on a CUDA worker, plus free RAM for GGUF (llama.cpp keeps the layers that do not fit on the CPU).
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from xinference.engines.base import Engine
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = [
    "DEFAULT_CONTEXT_CAP",
    "GIB",
    "MemoryEstimate",
    "available_memory",
    "check_fit",
    "estimate_memory",
    "kv_bytes_per_token",
    "launch_context",
    "local_weights_bytes",
    "local_weights_file",
    "size_in_billions",
    "weight_bits",
]

GIB = 1024**3
#: Context the engines allocate by default when the launch does not say (llama.cpp's ``MAX_DEFAULT_CTX``).
DEFAULT_CONTEXT_CAP = 8192
#: Launch options that set the context, per engine (llama.cpp, vLLM, SGLang).
CONTEXT_OPTIONS = ("n_ctx", "max_model_len", "context_length")

#: Bits per weight of GGUF quantizations (llama.cpp's averages, block scales included).
_GGUF_BITS: dict[str, float] = {
    "Q2_K": 2.63,
    "Q3_K_S": 3.5,
    "Q3_K_M": 3.91,
    "Q3_K_L": 4.27,
    "IQ4_XS": 4.25,
    "IQ4_NL": 4.5,
    "Q4_0": 4.5,
    "Q4_1": 5.0,
    "Q4_K_S": 4.58,
    "Q4_K_M": 4.85,
    "Q5_0": 5.5,
    "Q5_1": 6.0,
    "Q5_K_S": 5.54,
    "Q5_K_M": 5.69,
    "Q6_K": 6.56,
    "Q8_0": 8.5,
    "F16": 16.0,
    "BF16": 16.0,
    "FP16": 16.0,
    "F32": 32.0,
}
_RUNTIME_OVERHEAD = {"cpu": int(0.25 * GIB), "gpu": int(1.0 * GIB)}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a launch is expected to take, by part."""

    weights: int
    kv_cache: int
    overhead: int
    context: int
    #: a GGUF vision model's multimodal projector (the vision tower), loaded beside the weights
    projector: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.overhead + self.projector


def size_in_billions(spec: ModelSpec) -> float:
    """``"0_135"`` → 0.135, ``7`` → 7.0."""
    return float(str(spec.model_size_in_billions).replace("_", "."))


def weight_bits(model_format: str, quantization: str) -> float:
    """Average bits per parameter for a format and quantization; unknown quantizations count as 16-bit."""
    quant = quantization.upper()
    if model_format == "ggufv2":
        return _GGUF_BITS.get(quant, 16.0)
    if model_format in ("awq", "gptq", "mlx"):
        for bits in (2, 3, 4, 6, 8):
            if str(bits) in quant:
                return bits + 0.5  # group scales and zeros
        return 16.0
    if model_format == "fp8":
        return 8.0
    if "INT8" in quant or quant in ("8BIT", "8-BIT"):
        return 8.0
    if "INT4" in quant or quant in ("4BIT", "4-BIT"):
        return 4.5
    return 16.0


def kv_bytes_per_token(billions: float) -> int:
    """16-bit KV cache bytes per token of context, estimated from the size (see the module docstring)."""
    return int(36 * 1024 * max(billions, 0.05) ** 0.6)


def launch_context(
    family: ModelFamily, engine_kwargs: dict[str, Any], options: tuple[str, ...] = CONTEXT_OPTIONS
) -> int:
    """The context the launch will allocate: an explicit option (one of ``options``, the engine's own name for it),
    else the model's own capped at 8192."""
    for name in options:
        value = engine_kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return min(family.context_length or 4096, DEFAULT_CONTEXT_CAP)


def local_weights_bytes(spec: ModelSpec, quantization: str) -> int | None:
    """Size of the weights when they are a single file already on this machine (a bundled GGUF, a ``file://``
    GGUF), else ``None``. Never imports the bundled package and never raises."""
    path = local_weights_file(spec, quantization)
    try:
        return os.path.getsize(path) if path is not None else None
    except OSError:
        return None


#: A projector whose file is not on this machine yet (it downloads with the weights): a SigLIP-so400m-sized vision
#: tower in f16, the common case (Gemma 3, SmolVLM, LLaVA-OneVision); Qwen2.5-VL's is ~1.3 GB, small ones ~0.2 GB.
UNKNOWN_PROJECTOR_BYTES = int(0.8 * GIB)


def projector_bytes(spec: ModelSpec, quantization: str, projector: str) -> int:
    """Size of a multimodal projector: the file's when it is on this machine (an absolute path, or beside a local
    GGUF), else :data:`UNKNOWN_PROJECTOR_BYTES`. Never raises."""
    path: str | None = projector if os.path.isabs(projector) else None
    if path is None:
        weights = local_weights_file(spec, quantization)
        path = os.path.join(os.path.dirname(weights), projector) if weights is not None else None
    try:
        return os.path.getsize(path) if path is not None else UNKNOWN_PROJECTOR_BYTES
    except OSError:
        return UNKNOWN_PROJECTOR_BYTES


def local_weights_file(spec: ModelSpec, quantization: str) -> str | None:
    """The weights' path when they are a single file already on this machine (a bundled GGUF, a ``file://`` GGUF),
    else ``None``. Never imports the bundled package and never raises."""
    path: str | None = None
    try:
        if spec.bundled is not None and spec.bundled.resolver is None and spec.bundled.file:
            found = importlib.util.find_spec(spec.bundled.package)
            if found is not None and found.submodule_search_locations:
                path = os.path.join(list(found.submodule_search_locations)[0], spec.bundled.file)
        elif spec.model_uri is not None and spec.model_format == "ggufv2":
            path = os.path.normpath(unquote(urlparse(spec.model_uri).path))
            if os.path.isdir(path) and spec.model_file_name_template:
                path = os.path.join(path, spec.model_file_name_template.format(quantization=quantization))
        if path is not None and os.path.isfile(path):
            return path
    except (ImportError, ValueError, OSError):
        return None
    return None


def estimate_memory(
    family: ModelFamily,
    spec: ModelSpec,
    quantization: str,
    context: int,
    *,
    on_gpu: bool,
    weights_bytes: int | None = None,
) -> MemoryEstimate:
    """Weights + KV cache for ``context`` tokens + runtime overhead; ``weights_bytes`` (a file's size) wins over
    the parameter-count estimate."""
    billions = size_in_billions(spec)
    if weights_bytes is None:
        weights_bytes = math.ceil(billions * 1e9 * weight_bits(spec.model_format, quantization) / 8)
    kv = kv_bytes_per_token(billions) * context if family.model_type == "LLM" else 0
    return MemoryEstimate(
        weights=weights_bytes,
        kv_cache=kv,
        overhead=_RUNTIME_OVERHEAD["gpu" if on_gpu else "cpu"],
        context=context,
    )


def available_memory(hardware: HardwareInfo, model_format: str, spills_to_ram: bool | None = None) -> tuple[int, str]:
    """(free bytes that count for this launch, what they are: ``RAM``, ``VRAM`` or ``VRAM + RAM``).

    ``spills_to_ram``: the engine keeps what does not fit in VRAM in RAM (llama.cpp); when not given, GGUF weights
    are assumed to (they only run on llama.cpp)."""
    if spills_to_ram is None:
        spills_to_ram = model_format == "ggufv2"
    if hardware.cuda_available:
        vram = sum(gpu.memory_free_bytes for gpu in hardware.gpus if gpu.vendor == "nvidia")
        if spills_to_ram:
            return vram + hardware.ram_free_bytes, "VRAM + RAM"
        return vram, "VRAM"
    return hardware.ram_free_bytes, "RAM"


def check_fit(
    family: ModelFamily,
    spec: ModelSpec,
    quantization: str,
    hardware: HardwareInfo,
    engine_kwargs: dict[str, Any],
    replicas: int = 1,
    engine: type[Engine] | None = None,
) -> str | None:
    """``None`` when the launch fits ``hardware``; otherwise the sentence to refuse it with.

    ``engine`` (the chosen adapter class) estimates its own needs (``Engine.estimate_memory``: its context option,
    a server that reserves a fixed cache) and says whether it spills to RAM; without it, the generic estimate."""
    if engine is not None:
        estimate = engine.estimate_memory(family, spec, quantization, engine_kwargs, hardware)
        spills: bool | None = engine.spills_to_ram
    else:
        estimate = estimate_memory(
            family,
            spec,
            quantization,
            launch_context(family, engine_kwargs),
            on_gpu=hardware.cuda_available,
            weights_bytes=local_weights_bytes(spec, quantization),
        )
        spills = None
    context = estimate.context
    needed = estimate.total * max(1, replicas)
    free, kind = available_memory(hardware, spec.model_format, spills)
    if needed <= free:
        return None
    what = f"{family.model_name} ({spec.model_format}, {spec.size}B, {quantization})"
    if replicas > 1:
        what += f" × {replicas} replicas"
    projector = f" + multimodal projector ~{_gib(estimate.projector)} GiB" if estimate.projector else ""
    return (
        f"{what} needs ~{_gib(needed)} GiB, worker has {_gib(free)} GiB free {kind} (estimate per replica: "
        f"weights ~{_gib(estimate.weights)} GiB + KV cache ~{_gib(estimate.kv_cache)} GiB for {context} tokens + "
        f"runtime ~{_gib(estimate.overhead)} GiB{projector}); pass ignore_memory_check=true to try anyway"
    )


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / GIB:.1f}"
