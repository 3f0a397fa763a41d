"""The engine matrix (Xinference-compatible): which engine can run a model here, or why not.

``GET /v1/engines/{model_name}`` and ``GET /v1/engines/{model_type}/{model_name}`` answer Xinference's shape, so its
client's ``query_engine_by_model_name`` reads it: engine name → the params it accepts (one entry per format and
size, with the quantizations) or, when it cannot run the model anywhere in the cluster, the sentence saying why.
The service validates the names, then asks the supervisor (which knows the workers).
"""

from __future__ import annotations

from typing import Any, Union

from fastapi import APIRouter, FastAPI, Request

from xinference.api.admin.registrations import canonical_model_type
from xinference.core.refs import SupervisorRef
from xinference.errors import InvalidRequest
from xinference.model.spec import validate_model_name

__all__ = ["EngineParams", "EngineTable", "EnginesService", "attach_router"]

# -- protocol ----------------------------------------------------------------------------------------------------------
#: One accepted spec: ``model_name``, ``model_format``, ``model_size_in_billions``, ``quantizations``,
#: ``model_hub``.
EngineParams = dict[str, Any]
EngineTable = dict[str, Union[list[EngineParams], str]]


# -- serving -----------------------------------------------------------------------------------------------------------
class EnginesService:
    def __init__(self, supervisor: SupervisorRef) -> None:
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


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> EnginesService:
    service = getattr(request.app.state, "engines", None)
    if service is None:
        service = request.app.state.engines = EnginesService(request.app.state.supervisor)
    return service


@router.get("/v1/engines/{model_name}")
async def query_engines(model_name: str, request: Request) -> EngineTable:
    return await _service(request).query(model_name)


@router.get("/v1/engines/{model_type}/{model_name}")
async def query_engines_by_type(model_type: str, model_name: str, request: Request) -> EngineTable:
    return await _service(request).query(model_name, model_type)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
