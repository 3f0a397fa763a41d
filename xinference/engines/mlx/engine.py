"""MLX: mlx-format weights (``mlx-community/...``) on macOS with Apple silicon, through mlx-lm.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``MLXConfig.to_cli_args``). The
runtime part is not built yet, so ``load`` says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.base import Engine, Verdict
from xinference.engines.libcheck import check_library
from xinference.engines.mlx.config import MLXConfig
from xinference.errors import LaunchFailed

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["MLXEngine"]

_INSTALL_HINT = "pip install mlx-lm"
_MIN_VERSION = "0.20.0"


class MLXEngine(Engine):
    """LLMs on Apple silicon through mlx-lm."""

    name: ClassVar[str] = "MLX"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"mlx"})
    config_class = MLXConfig

    @classmethod
    def check_lib(cls) -> Verdict:
        return check_library(cls.name, "mlx_lm", "mlx-lm", _MIN_VERSION, _INSTALL_HINT)

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        if not hardware.is_apple_silicon:
            where = f"{hardware.os} {hardware.arch}"
            return Verdict.reject(f"MLX needs macOS on Apple silicon; this worker is {where}")
        if family.model_type not in cls.model_types:
            return Verdict.reject(f"MLX does not serve {family.model_type} models")
        if spec.model_format != "mlx":
            return Verdict.reject(f"MLX needs an mlx-format spec, not {spec.model_format}")
        return Verdict.ok()

    async def load(self) -> None:
        for verdict in (self.match(self.family, self.spec, self.hardware), self.check_lib()):
            if not verdict:
                raise LaunchFailed(f"{self.name} cannot start on this worker: {verdict.reason}")
        raise LaunchFailed(f"{self.name} fits this worker, but its runner is not built yet; use llama.cpp for now")

    async def unload(self) -> None:
        return None
