"""SGLang: pytorch, AWQ, GPTQ and FP8 weights on CUDA GPUs under Linux, with continuous batching and a radix cache.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``SGLangConfig.to_cli_args``).
SGLang will run as a managed subprocess speaking its own OpenAI protocol; that runner is not built yet, so ``load``
says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.base import Engine, Verdict
from xinference.engines.libcheck import check_library
from xinference.engines.sglang.config import SGLangConfig
from xinference.engines.vllm.engine import cuda_linux_verdict
from xinference.errors import LaunchFailed

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["SGLangEngine"]

_INSTALL_HINT = 'pip install "sglang[all]"'
_MIN_VERSION = "0.4.0"


class SGLangEngine(Engine):
    """LLMs on NVIDIA GPUs through SGLang (managed subprocess)."""

    name: ClassVar[str] = "SGLang"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    config_class = SGLangConfig

    @classmethod
    def check_lib(cls) -> Verdict:
        return check_library(cls.name, "sglang", "sglang", _MIN_VERSION, _INSTALL_HINT)

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        where = cuda_linux_verdict(cls.name, hardware)
        if not where:
            return where
        return super().match(family, spec, hardware)

    async def load(self) -> None:
        for verdict in (self.match(self.family, self.spec, self.hardware), self.check_lib()):
            if not verdict:
                raise LaunchFailed(f"{self.name} cannot start on this worker: {verdict.reason}")
        raise LaunchFailed(
            f"{self.name} fits this worker, but the managed-process runner that starts SGLang's OpenAI server is "
            "not built yet; launch with another engine for now"
        )

    async def unload(self) -> None:
        return None
