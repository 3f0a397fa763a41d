"""vLLM, SGLang and MLX adapters on this CPU machine: library checks, fit reasons, configs and CLI arguments.

vLLM's and SGLang's own fit, arguments and runner are tested in ``test_vllm*.py``, ``test_sglang*.py`` and
``test_managed*.py``."""

from __future__ import annotations

import asyncio

import pytest

from tests.machines import linux, mac
from xinference.core.hardware import HardwareInfo
from xinference.engines.libcheck import check_library, version_tuple
from xinference.engines.mlx.config import MLXConfig
from xinference.engines.mlx.engine import MLXEngine
from xinference.engines.registry import get_engine_class
from xinference.engines.sglang.engine import SGLangEngine
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.registry import ModelRegistry

CPU = linux()
CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1, gpu_name="A100", vram=40, vram_free=39)
MAC = mac(cores=8, ram_total=16, ram_free=10, unified_gpu=False)
INTEL_MAC = mac(cores=8, ram_total=16, ram_free=10, apple_silicon=False)

REGISTRY = ModelRegistry()
QWEN3 = REGISTRY.get("qwen3")


def _spec(fmt: str):  # type: ignore[no-untyped-def]
    return next(s for s in QWEN3.model_specs if s.model_format == fmt)


def test_registry_names_resolve() -> None:
    assert get_engine_class("vllm") is VLLMEngine
    assert get_engine_class("SGLANG") is SGLangEngine
    assert get_engine_class("mlx") is MLXEngine


@pytest.mark.parametrize(("cls", "package"), [(MLXEngine, "mlx-lm")])
def test_check_lib_names_the_package_to_install(cls, package: str) -> None:  # type: ignore[no-untyped-def]
    verdict = cls.check_lib()
    assert not verdict
    assert f"needs the {package} package" in verdict.reason and "pip install" in verdict.reason


def test_check_library_versions(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert version_tuple("0.8.5.post1") == (0, 8, 5)
    assert version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert check_library("X", "pydantic", "pydantic", "2.0", "pip install pydantic")
    too_old = check_library("X", "pydantic", "pydantic", "99.0", "pip install pydantic")
    assert not too_old and "pydantic >= 99.0" in too_old.reason and "--upgrade" in too_old.reason


def test_mlx_needs_apple_silicon_and_mlx_weights() -> None:
    assert MLXEngine.match(QWEN3, _spec("mlx"), MAC)
    assert MLXEngine.match(QWEN3, _spec("pytorch"), MAC).reason == "MLX needs an mlx-format spec, not pytorch"
    expected = "MLX needs macOS on Apple silicon; this worker is linux x86_64"
    assert MLXEngine.match(QWEN3, _spec("mlx"), CPU).reason == expected
    assert "darwin x86_64" in MLXEngine.match(QWEN3, _spec("mlx"), INTEL_MAC).reason


def test_mlx_cli_args() -> None:
    config = MLXEngine.parse_config({"max_tokens": 512, "trust_remote_code": True})
    assert isinstance(config, MLXConfig)
    assert config.to_cli_args(model_path="/m", host="127.0.0.1", port=8080) == [
        "--model", "/m", "--host", "127.0.0.1", "--port", "8080", "--max-tokens", "512", "--trust-remote-code"]


@pytest.mark.parametrize("cls", [VLLMEngine, SGLangEngine, MLXEngine])
def test_unknown_or_bad_options_are_400(cls) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest, match="does not take a launch option 'n_ctx'"):
        cls.parse_config({"n_ctx": 4096})


def _engine(cls, hardware: HardwareInfo, fmt: str):  # type: ignore[no-untyped-def]
    spec = _spec(fmt)
    return cls(model_uid="u", family=QWEN3, spec=spec, quantization=spec.quantizations[0], model_path="/m",
               config=cls.config_class(), hardware=hardware)


def test_mlx_load_is_honest() -> None:
    with pytest.raises(LaunchFailed, match="MLX cannot start on this worker: MLX needs macOS"):
        asyncio.run(_engine(MLXEngine, CPU, "mlx").load())
