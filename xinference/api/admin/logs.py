"""``GET /v1/models/{uid}/logs``: a replica's log, bounded and with local paths shortened (the web UI's Logs page
and ``xinference logs``). The service validates the uid, then asks the supervisor, which reads on the replica's
worker."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from pydantic import BaseModel

from xinference.core.logs import DEFAULT_TAIL_LINES, MAX_TAIL_LINES
from xinference.errors import InvalidRequest
from xinference.model.spec import validate_model_name

__all__ = ["LogsService", "ModelLog", "attach_router"]


# -- protocol ----------------------------------------------------------------------------------------------------------
class ModelLog(BaseModel):
    """A bounded piece of one replica's log. Follow a log by passing ``offset`` back as ``since``; ``reset`` means
    the file was truncated since (the replica restarted), so drop what was shown."""

    model_config = {"protected_namespaces": ()}

    model_uid: str
    replica_uid: str
    worker: str
    #: every replica uid of the model, to choose from
    replicas: list[str]
    lines: list[str]
    offset: int
    size: int
    #: older lines exist that were not returned (``tail`` or the 1 MiB read bound)
    truncated: bool
    reset: bool


# -- serving -----------------------------------------------------------------------------------------------------------
class LogsService:
    """Reads replicas' logs through the supervisor."""

    def __init__(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    async def read(self, model_uid: str, replica: str | None, tail: int, since: int | None) -> ModelLog:
        """The tail of one replica's log (the first replica unless ``replica`` names one by index or uid)."""
        try:
            uid = validate_model_name(model_uid, "model_uid")
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="model_uid") from None
        data: dict[str, Any] = await self._supervisor.model_log(uid, replica, tail, since)
        return ModelLog.model_validate(data)


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> LogsService:
    return LogsService(request.app.state.supervisor)


@router.get("/v1/models/{model_uid}/logs")
async def model_logs(
    model_uid: str,
    request: Request,
    replica: str | None = Query(None, max_length=120, description="replica index (0, 1, ...) or replica uid"),
    tail: int = Query(DEFAULT_TAIL_LINES, ge=0, le=MAX_TAIL_LINES, description="at most this many last lines"),
    since: int | None = Query(None, ge=0, description="only what was written after this byte offset"),
) -> ModelLog:
    return await _service(request).read(model_uid, replica, tail, since)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
