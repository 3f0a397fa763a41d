"""Request and response shapes of the engine-environment routes (``/v1/engines/{engine}/install`` ...)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EngineEnvReport", "EngineInstallRequest", "EngineListing"]


class EngineInstallRequest(BaseModel):
    """``POST /v1/engines/{engine}/install``: install on every worker, or on ``worker_ip`` only."""

    model_config = ConfigDict(extra="forbid")

    worker_ip: str | None = Field(default=None, description="only this worker (address or host)")
    force: bool = Field(default=False, description="reinstall even when the same recipe is installed")
    wait: bool = Field(default=False, description="answer once the install has ended (minutes for vLLM)")
    timeout: float = Field(default=1800.0, gt=0, le=7200, description="seconds `wait` may take")


class EngineEnvReport(BaseModel):
    """Per worker: ``installed``, ``installing``, ``progress`` (stage, message, fraction, log tail), ``error``,
    ``packages`` (the recipe's packages with versions) and ``check`` (the library verdict: empty when usable)."""

    engine: str
    workers: list[dict[str, Any]]


#: ``GET /v1/engines``: engine name → worker address → "" (available) or the reason it is not.
EngineListing = dict[str, dict[str, str]]
