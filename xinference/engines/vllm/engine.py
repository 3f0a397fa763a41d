"""vLLM: pytorch, AWQ, GPTQ and FP8 weights on CUDA GPUs under Linux, with continuous batching.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``VLLMConfig.to_cli_args``). vLLM
will run as a managed subprocess speaking its own OpenAI protocol; that runner (start, health wait, proxy, abort,
shutdown) is not built yet, so ``load`` says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.pending import PendingRunnerEngine, cuda_linux_verdict
from xinference.engines.vllm.config import VLLMConfig

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.engines.base import Verdict

__all__ = ["VLLMEngine", "cuda_linux_verdict"]


class VLLMEngine(PendingRunnerEngine):
    """LLMs on NVIDIA GPUs through vLLM (managed subprocess)."""

    name: ClassVar[str] = "vLLM"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    config_class = VLLMConfig
    module, distribution, min_version = "vllm", "vllm", "0.6.0"
    install_hint = "pip install vllm"
    runner = "managed-process runner (vLLM's OpenAI server)"

    @classmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        return cuda_linux_verdict(cls.name, hardware)
