"""Base of the engines whose fit and options are real but whose runtime is not built yet (vLLM, SGLang, MLX).

They answer ``check_lib``/``match`` and translate their typed launch options like any engine, so the matcher and
``GET /v1/engines`` tell the truth about them on every worker. ``load`` says plainly why the model cannot start:
either the engine cannot run on this worker (with the reason), or its runner is not built yet.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar

from xinference.engines.base import Engine, Verdict
from xinference.engines.envs import check_engine_lib
from xinference.errors import LaunchFailed

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["PendingRunnerEngine", "cuda_linux_verdict"]


def cuda_linux_verdict(engine: str, hardware: HardwareInfo) -> Verdict:
    """Accepted on Linux with at least one NVIDIA GPU; otherwise the sentence a user reads."""
    if hardware.os == "linux" and hardware.cuda_available:
        return Verdict.ok()
    if hardware.os != "linux":
        where = "macOS" if hardware.os == "darwin" else (hardware.os or "an unknown OS")
        return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker runs {where}")
    return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker has none")


class PendingRunnerEngine(Engine):
    """Subclasses set the usual flags plus the library to look for and ``platform_verdict``."""

    module: ClassVar[str]
    distribution: ClassVar[str]
    min_version: ClassVar[str | None] = None
    install_hint: ClassVar[str]
    runner: ClassVar[str] = "runner"

    @classmethod
    def check_lib(cls) -> Verdict:
        return check_engine_lib(cls.name, cls.module, cls.distribution, cls.min_version)

    @classmethod
    @abc.abstractmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        """Whether the worker's OS and accelerators suit the engine at all (checked before the format)."""

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        where = cls.platform_verdict(hardware)
        return where if not where else super().match(family, spec, hardware)

    async def load(self) -> None:
        for verdict in (self.match(self.family, self.spec, self.hardware), self.check_lib()):
            if not verdict:
                raise LaunchFailed(f"{self.name} cannot start on this worker: {verdict.reason}")
        raise LaunchFailed(
            f"{self.name} fits this worker, but its {self.runner} is not built yet; launch with another engine"
        )

    async def unload(self) -> None:
        return None
