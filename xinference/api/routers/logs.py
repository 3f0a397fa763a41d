"""``GET /v1/models/{uid}/logs``: a replica's log, bounded and with local paths shortened."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Query, Request

from xinference.api.protocol.logs import ModelLog
from xinference.api.serving.logs import read_model_log
from xinference.core.logs import DEFAULT_TAIL_LINES, MAX_TAIL_LINES

__all__ = ["attach_router"]

router = APIRouter()


@router.get("/v1/models/{model_uid}/logs")
async def model_logs(
    model_uid: str,
    request: Request,
    replica: str | None = Query(None, max_length=120, description="replica index (0, 1, ...) or replica uid"),
    tail: int = Query(DEFAULT_TAIL_LINES, ge=0, le=MAX_TAIL_LINES, description="at most this many last lines"),
    since: int | None = Query(None, ge=0, description="only what was written after this byte offset"),
) -> ModelLog:
    return await read_model_log(request.app.state.supervisor, model_uid, replica, tail, since)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
