"""vLLM: pytorch, AWQ, GPTQ and FP8 weights on CUDA GPUs under Linux, with continuous batching.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``VLLMConfig.to_cli_args``). vLLM
will run as a managed subprocess speaking its own OpenAI protocol; that runner (start, health wait, proxy, abort,
shutdown) is not built yet, so ``load`` says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.base import Engine, Verdict
from xinference.engines.libcheck import check_library
from xinference.engines.vllm.config import VLLMConfig
from xinference.errors import LaunchFailed

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["VLLMEngine", "cuda_linux_verdict"]

_INSTALL_HINT = "pip install vllm"
_MIN_VERSION = "0.6.0"


def cuda_linux_verdict(engine: str, hardware: HardwareInfo) -> Verdict:
    """Accepted on Linux with at least one NVIDIA GPU; otherwise the sentence a user reads."""
    os_name = hardware.os
    if os_name == "linux" and hardware.cuda_available:
        return Verdict.ok()
    if os_name != "linux":
        where = "macOS" if os_name == "darwin" else (os_name or "an unknown OS")
        return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker runs {where}")
    return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker has none")


class VLLMEngine(Engine):
    """LLMs on NVIDIA GPUs through vLLM (managed subprocess)."""

    name: ClassVar[str] = "vLLM"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    config_class = VLLMConfig

    @classmethod
    def check_lib(cls) -> Verdict:
        return check_library(cls.name, "vllm", "vllm", _MIN_VERSION, _INSTALL_HINT)

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
            f"{self.name} fits this worker, but the managed-process runner that starts vLLM's OpenAI server is not "
            "built yet; launch with another engine for now"
        )

    async def unload(self) -> None:
        return None
