"""SGLang: pytorch, AWQ, GPTQ and FP8 weights on CUDA GPUs under Linux, with continuous batching and a radix cache.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``SGLangConfig.to_cli_args``).
SGLang will run as a managed subprocess speaking its own OpenAI protocol; that runner is not built yet, so ``load``
says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.pending import PendingRunnerEngine, cuda_linux_verdict
from xinference.engines.sglang.config import SGLangConfig

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.engines.base import Verdict

__all__ = ["SGLangEngine"]


class SGLangEngine(PendingRunnerEngine):
    """LLMs on NVIDIA GPUs through SGLang (managed subprocess)."""

    name: ClassVar[str] = "SGLang"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    config_class = SGLangConfig
    module, distribution, min_version = "sglang", "sglang", "0.4.0"
    install_hint = 'pip install "sglang[all]"'
    runner = "managed-process runner (SGLang's OpenAI server)"

    @classmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        return cuda_linux_verdict(cls.name, hardware)
