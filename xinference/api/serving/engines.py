"""What the engine-matrix routes do: validate the names, then ask the supervisor (which knows the workers)."""

from __future__ import annotations

from typing import Any

from xinference.api.protocol.engines import EngineTable
from xinference.api.protocol.registrations import canonical_model_type
from xinference.errors import InvalidRequest
from xinference.model.spec import validate_model_name

__all__ = ["EnginesService"]


class EnginesService:
    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    async def query(self, model_name: str, model_type: str | None = None) -> EngineTable:
        """Every engine's verdict on ``model_name`` (of ``model_type`` when given) over the cluster's workers."""
        try:
            name = validate_model_name(model_name)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="model_name") from None
        kind = canonical_model_type(model_type) if model_type is not None else None
        table: EngineTable = await self._supervisor.query_engines(kind, name)
        return table
