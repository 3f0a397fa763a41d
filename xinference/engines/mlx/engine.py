"""MLX: mlx-format weights (``mlx-community/...``) on macOS with Apple silicon, through mlx-lm.

The adapter decides fit (``check_lib``/``match``) and translates launch options (``MLXConfig.to_cli_args``). The
runtime part is not built yet, so ``load`` says so instead of pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from xinference.engines.base import Verdict
from xinference.engines.mlx.config import MLXConfig
from xinference.engines.pending import PendingRunnerEngine

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["MLXEngine"]


class MLXEngine(PendingRunnerEngine):
    """LLMs on Apple silicon through mlx-lm."""

    name: ClassVar[str] = "MLX"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"mlx"})
    config_class = MLXConfig
    module, distribution, min_version = "mlx_lm", "mlx-lm", "0.20.0"
    install_hint = "pip install mlx-lm"
    runner = "runtime"

    @classmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        if hardware.is_apple_silicon:
            return Verdict.ok()
        return Verdict.reject(f"MLX needs macOS on Apple silicon; this worker is {hardware.os} {hardware.arch}")

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        if hardware.is_apple_silicon and spec.model_format != "mlx":
            return Verdict.reject(f"MLX needs an mlx-format spec, not {spec.model_format}")
        return super().match(family, spec, hardware)
