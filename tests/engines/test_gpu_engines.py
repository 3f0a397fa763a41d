"""vLLM, SGLang and MLX adapters on this CPU machine: names, library checks and option errors.

vLLM's and SGLang's own fit, arguments and runner are tested in ``test_vllm*.py``, ``test_sglang*.py`` and
``test_managed*.py``; MLX's in ``test_mlx*.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xinference.engines.envs.libcheck import check_library, version_tuple
from xinference.engines.mlx.engine import MLXEngine
from xinference.engines.registry import get_engine_class
from xinference.engines.sglang.engine import SGLangEngine
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest


def test_registry_names_resolve() -> None:
    assert get_engine_class("vllm") is VLLMEngine
    assert get_engine_class("SGLANG") is SGLangEngine
    assert get_engine_class("mlx") is MLXEngine


def test_check_library_versions(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert version_tuple("0.8.5.post1") == (0, 8, 5)
    assert version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert check_library("X", "pydantic", "pydantic", "2.0", "pip install pydantic")
    too_old = check_library("X", "pydantic", "pydantic", "99.0", "pip install pydantic")
    assert not too_old and "pydantic >= 99.0" in too_old.reason and "--upgrade" in too_old.reason


@pytest.mark.parametrize("cls", [VLLMEngine, SGLangEngine, MLXEngine])
def test_unknown_or_bad_options_are_400(cls) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest, match="does not take a launch option 'n_ctx'"):
        cls.parse_config({"n_ctx": 4096})


def test_the_whisper_gpu_check_says_what_cuda_float16_needs() -> None:
    """``scripts/gpu_whisper_check.py`` checks faster-whisper's CUDA float16 path on a GPU machine; here (no CUDA in
    CTranslate2) its first check refuses with what to install, or lets ``--allow-cpu`` run the script on int8."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    if ctranslate2.get_cuda_device_count():
        pytest.skip("this machine has CUDA: the script itself is the check")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import gpu_whisper_check

    with pytest.raises(RuntimeError, match="cuDNN 9"):
        gpu_whisper_check.cuda_report(allow_cpu=False)
    assert "int8 on the CPU" in gpu_whisper_check.cuda_report(allow_cpu=True)
