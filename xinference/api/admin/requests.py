"""``POST /v1/models/{model_uid}/requests/{request_id}/abort``: stop a chat or text completion sent with
``request_id`` (Xinference's ``abort_request``). The running requests are kept by the generation service
(:mod:`xinference.api.gateway.requests`); this route checks the model and asks it to abort."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from xinference.api.gateway.requests import MAX_BLOCK_SECONDS, RunningRequests
from xinference.core.refs import SupervisorRef

__all__ = ["AbortRequestBody", "RequestsService", "attach_router"]


# -- protocol ----------------------------------------------------------------------------------------------------------
class AbortRequestBody(BaseModel):
    """The body Xinference's client sends (it may be left out)."""

    model_config = ConfigDict(extra="forbid")

    block_duration: int = Field(
        default=30,
        ge=0,
        le=MAX_BLOCK_SECONDS,
        strict=True,
        description="seconds during which a request arriving under this id is refused too (0: none)",
    )


# -- serving -----------------------------------------------------------------------------------------------------------
class RequestsService:
    def __init__(self, supervisor: SupervisorRef, running: RunningRequests) -> None:
        self._supervisor = supervisor
        self._running = running

    async def abort(self, model_uid: str, request_id: str, block_duration: int) -> dict[str, Any]:
        """``{"msg": "DONE"}`` when a running request was aborted, ``{"msg": "NOT_FOUND"}`` when none runs under
        that id (Xinference's answers); an unknown model is a 404."""
        await self._supervisor.describe_model(model_uid)  # ModelNotFound (404) for an unknown uid
        aborted = self._running.abort(model_uid, request_id, block_duration)
        return {"msg": "DONE" if aborted else "NOT_FOUND"}


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


@router.post("/v1/models/{model_uid}/requests/{request_id}/abort")
async def abort_request(
    model_uid: str, request_id: str, request: Request, body: AbortRequestBody | None = None
) -> dict[str, Any]:
    state = request.app.state
    service = RequestsService(state.supervisor, state.generation.requests)
    return await service.abort(model_uid, request_id, (body or AbortRequestBody()).block_duration)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
