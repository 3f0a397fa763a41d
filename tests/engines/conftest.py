"""Marks the engine tests that load real weights in this process (``heavy``), which ``make test-fast`` leaves
out; the configuration, matching and protocol tests of this folder stay in it."""

from __future__ import annotations

import pytest

#: modules whose tests load a model in-process or start an engine's server
_LOADS_WEIGHTS = frozenset(
    {
        "test_llama_cpp",
        "test_llama_cpp_pooled",
        "test_llama_cpp_speculative",
        "test_llama_cpp_structured",
        "test_transformers",
        "test_transformers_structured",
        "test_sentence_transformers",
        "test_mlx_engine",
        "test_mlx_vision",
        "test_vllm",
        "test_vllm_pooled",
        "test_vllm_vision",
        "test_sglang",
        "test_gpu_engines",
        "test_envs",
        "test_transformers_prefill_failure",
        "test_transformers_vision",
        "test_transformers_vision_mrope",
        "test_tts_engines",
        "test_diffusers",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__.rsplit(".", 1)[-1] in _LOADS_WEIGHTS:
            item.add_marker(pytest.mark.heavy)
