"""The memory estimate and the fit check (pure: no process, no download)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.machines import linux
from xinference.engines.memory import (
    GIB,
    UNKNOWN_PROJECTOR_BYTES,
    available_memory,
    check_fit,
    estimate_memory,
    kv_bytes_per_token,
    launch_context,
    local_weights_bytes,
    weight_bits,
)
from xinference.model.registry import ModelRegistry

CPU_24G = linux()
GPU_80G = linux(cores=16, ram_total=64, ram_free=60, gpus=1, vram_free=70)


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry()


def _choice(registry: ModelRegistry, name: str, fmt: str, size: int | str, quant: str | None = None):  # type: ignore[no-untyped-def]
    return registry.choices(registry.get(name), fmt, size, quant)[0]


@pytest.mark.parametrize(
    ("fmt", "quant", "bits"),
    [
        ("ggufv2", "Q4_K_M", 4.85),
        ("ggufv2", "q8_0", 8.5),
        ("awq", "Int4", 4.5),
        ("gptq", "Int8", 8.5),
        ("fp8", "fp8", 8.0),
        ("pytorch", "none", 16.0),
        ("mlx", "4bit", 4.5),
        ("ggufv2", "weird", 16.0),
    ],
)
def test_weight_bits(fmt: str, quant: str, bits: float) -> None:
    assert weight_bits(fmt, quant) == bits


def test_kv_estimate_is_close_to_real_gqa_models() -> None:
    llama_8b = 32 * 8 * 128 * 2 * 2  # layers * kv heads * head dim * (k, v) * fp16
    assert 0.8 * llama_8b < kv_bytes_per_token(8) < 1.2 * llama_8b
    llama_70b = 80 * 8 * 128 * 2 * 2
    assert llama_70b < kv_bytes_per_token(70) < 2 * llama_70b


def test_launch_context(registry: ModelRegistry) -> None:
    family = registry.get("llama-3.1-instruct")
    assert launch_context(family, {}) == 8192
    assert launch_context(family, {"n_ctx": 2048}) == 2048
    assert launch_context(family, {"max_model_len": 65536}) == 65536
    assert launch_context(registry.get("smollm2-instruct"), {"n_ctx": True}) == 8192


def test_bundled_gguf_uses_the_file_size(registry: ModelRegistry) -> None:
    choice = _choice(registry, "smollm2-instruct", "ggufv2", "0_135", "Q4_1")
    size = local_weights_bytes(choice.spec, choice.quantization)
    assert size is not None and 50 * 1024**2 < size < 200 * 1024**2
    assert local_weights_bytes(_choice(registry, "qwen3", "ggufv2", 8).spec, "Q4_K_M") is None  # hub: not local


def test_small_model_fits_a_small_box(registry: ModelRegistry) -> None:
    choice = _choice(registry, "smollm2-instruct", "ggufv2", "0_135", "Q4_1")
    assert check_fit(choice.family, choice.spec, choice.quantization, CPU_24G, {}) is None


def test_70b_is_refused_on_24_gib_with_numbers(registry: ModelRegistry) -> None:
    choice = _choice(registry, "llama-3.1-instruct", "ggufv2", 70, "Q4_K_M")
    problem = check_fit(choice.family, choice.spec, choice.quantization, CPU_24G, {})
    assert problem is not None
    assert "needs ~4" in problem and "worker has 20.0 GiB free RAM" in problem
    assert "ignore_memory_check=true" in problem
    estimate = estimate_memory(choice.family, choice.spec, "Q4_K_M", 8192, on_gpu=False)
    assert 38 * GIB < estimate.weights < 42 * GIB  # the real file is 42.5 GB = 39.6 GiB


def test_gpu_counts_vram_and_gguf_adds_ram(registry: ModelRegistry) -> None:
    assert available_memory(GPU_80G, "pytorch") == (70 * GIB, "VRAM")
    assert available_memory(GPU_80G, "ggufv2") == (130 * GIB, "VRAM + RAM")
    assert available_memory(CPU_24G, "pytorch") == (20 * GIB, "RAM")
    fp8 = _choice(registry, "qwen3", "fp8", 32)
    assert check_fit(fp8.family, fp8.spec, fp8.quantization, GPU_80G, {}) is None
    bf16_70b = _choice(registry, "llama-3.1-instruct", "pytorch", 70)
    problem = check_fit(bf16_70b.family, bf16_70b.spec, bf16_70b.quantization, GPU_80G, {})
    assert problem is not None and "free VRAM" in problem


def test_replicas_multiply(registry: ModelRegistry) -> None:
    choice = _choice(registry, "qwen3", "ggufv2", 8, "Q4_K_M")
    assert check_fit(choice.family, choice.spec, choice.quantization, CPU_24G, {}) is None
    problem = check_fit(choice.family, choice.spec, choice.quantization, CPU_24G, {}, replicas=4)
    assert problem is not None and "× 4 replicas" in problem


def test_longer_context_needs_more(registry: ModelRegistry) -> None:
    choice = _choice(registry, "qwen3", "ggufv2", 8, "Q4_K_M")
    assert check_fit(choice.family, choice.spec, choice.quantization, CPU_24G, {"n_ctx": 131072}) is not None


def test_each_engine_reads_its_own_context_option(registry: ModelRegistry) -> None:
    from xinference.engines.llama_cpp.engine import LlamaCppEngine
    from xinference.engines.transformers.engine import TransformersEngine

    gguf = _choice(registry, "qwen3", "ggufv2", 8, "Q4_K_M")
    huge = {"n_ctx": 131072}
    assert check_fit(gguf.family, gguf.spec, gguf.quantization, CPU_24G, huge, engine=LlamaCppEngine) is not None
    torch_weights = _choice(registry, "qwen2.5-instruct", "pytorch", "0_5")
    # n_ctx means nothing to Transformers: its context is max_model_len
    assert (
        check_fit(
            torch_weights.family,
            torch_weights.spec,
            torch_weights.quantization,
            CPU_24G,
            huge,
            engine=TransformersEngine,
        )
        is None
    )
    assert (
        check_fit(
            torch_weights.family,
            torch_weights.spec,
            torch_weights.quantization,
            CPU_24G,
            {"max_model_len": 1 << 21},
            engine=TransformersEngine,
        )
        is not None
    )


def test_llama_cpp_counts_ram_beside_vram_and_others_do_not(registry: ModelRegistry) -> None:
    from xinference.engines.llama_cpp.engine import LlamaCppEngine
    from xinference.engines.vllm.engine import VLLMEngine

    assert LlamaCppEngine.spills_to_ram and not VLLMEngine.spills_to_ram
    assert available_memory(GPU_80G, "pytorch", spills_to_ram=True) == (130 * GIB, "VRAM + RAM")


def test_vllm_reserves_its_share_of_the_gpu_and_its_kv_space_on_a_cpu(registry: ModelRegistry) -> None:
    from xinference.engines.vllm.engine import VLLMEngine

    small = _choice(registry, "qwen2.5-instruct", "pytorch", "0_5")
    args = (small.family, small.spec, small.quantization)
    # 0.9 of an 80 GiB GPU is reserved whatever the model: 70 GiB free is not enough, 0.8 is
    problem = check_fit(*args, GPU_80G, {}, engine=VLLMEngine)
    assert problem is not None and "needs ~72.0 GiB" in problem
    assert check_fit(*args, GPU_80G, {"gpu_memory_utilization": 0.8}, engine=VLLMEngine) is None
    # on a CPU: weights + the KV space it is given + its processes
    assert check_fit(*args, CPU_24G, {}, engine=VLLMEngine) is None
    assert check_fit(*args, CPU_24G, {"cpu_kvcache_space_gib": 18}, engine=VLLMEngine) is not None


def test_llama_cpp_sizes_the_kv_cache_from_the_gguf_header_of_a_local_file(registry: ModelRegistry) -> None:
    """SmolLM2-135M: 30 blocks x 3 KV heads x (64 + 64) dims x 2 bytes = 23,040 bytes per token, which the
    parameter-count guess halves; a 2M-token context (45 GiB) must be refused on a 20 GiB machine."""
    from xinference.engines.llama_cpp.engine import LlamaCppEngine

    family = registry.get("smollm2-instruct")
    choice = _choice(registry, "smollm2-instruct", "ggufv2", "0_135", "Q4_1")
    estimate = LlamaCppEngine.estimate_memory(family, choice.spec, choice.quantization, {"n_ctx": 4096}, CPU_24G)
    assert estimate.kv_cache == 30 * 3 * (64 + 64) * 2 * 4096
    assert kv_bytes_per_token(0.135) * 4096 < estimate.kv_cache  # the guess it replaces was too low
    q8 = LlamaCppEngine.estimate_memory(
        family,
        choice.spec,
        choice.quantization,
        {"n_ctx": 4096, "cache_type_k": "Q8_0", "cache_type_v": "q8_0"},
        CPU_24G,
    )
    assert q8.kv_cache < estimate.kv_cache
    refusal = check_fit(family, choice.spec, choice.quantization, CPU_24G, {"n_ctx": 2097152}, engine=LlamaCppEngine)
    assert refusal is not None and "KV cache ~45.0 GiB" in refusal
    hub = _choice(registry, "qwen3", "ggufv2", 8)  # not on this machine: the guess stays
    guessed = LlamaCppEngine.estimate_memory(registry.get("qwen3"), hub.spec, "Q4_K_M", {"n_ctx": 4096}, CPU_24G)
    assert guessed.kv_cache == kv_bytes_per_token(8) * 4096


def test_llama_cpp_counts_the_multimodal_projector(tmp_path: Path, registry: ModelRegistry) -> None:
    from xinference.engines.llama_cpp.engine import LlamaCppEngine
    from xinference.model.spec import ModelFamily

    (tmp_path / "model.gguf").write_bytes(b"not a real GGUF: the header read fails and the guess stays")
    (tmp_path / "mmproj.gguf").write_bytes(b"\0" * 3_000_000)
    family = ModelFamily.model_validate(
        {
            "model_name": "tiny-vision",
            "model_ability": ["chat", "vision"],
            "context_length": 2048,
            "model_specs": [
                {
                    "model_format": "ggufv2",
                    "model_size_in_billions": "0_003",
                    "quantizations": ["F32"],
                    "model_uri": f"file://{tmp_path / 'model.gguf'}",
                    "multimodal_projectors": ["mmproj.gguf"],
                }
            ],
        }
    )
    spec = family.model_specs[0]
    plain = LlamaCppEngine.estimate_memory(family, spec, "F32", {}, CPU_24G)
    beside = LlamaCppEngine.estimate_memory(family, spec, "F32", {"projector": "mmproj.gguf"}, CPU_24G)
    assert plain.projector == 0 and beside.projector == 3_000_000
    assert beside.total == plain.total + 3_000_000
    absolute = LlamaCppEngine.estimate_memory(
        family, spec, "F32", {"projector": str(tmp_path / "mmproj.gguf")}, CPU_24G
    )
    assert absolute.projector == 3_000_000
    # weights on the hub: the projector downloads with them, its size is not known here yet
    hub = _choice(registry, "gemma-3-it", "ggufv2", 4)
    assert hub.spec.multimodal_projectors
    unknown = LlamaCppEngine.estimate_memory(
        hub.family, hub.spec, hub.quantization, {"projector": hub.spec.multimodal_projectors[0]}, CPU_24G
    )
    assert unknown.projector == UNKNOWN_PROJECTOR_BYTES
    tight = linux(ram_free=1).model_copy(update={"ram_free_bytes": plain.total + 1_000_000})
    assert check_fit(family, spec, "F32", tight, {}, engine=LlamaCppEngine) is None
    refusal = check_fit(family, spec, "F32", tight, {"projector": "mmproj.gguf"}, engine=LlamaCppEngine)
    assert refusal is not None and "multimodal projector ~0.0 GiB" in refusal
