"""What the logs route does: validate the uid, then ask the supervisor, which reads on the replica's worker."""

from __future__ import annotations

from typing import Any

from xinference.api.protocol.logs import ModelLog
from xinference.errors import InvalidRequest
from xinference.model.spec import validate_model_name

__all__ = ["read_model_log"]


async def read_model_log(supervisor: Any, model_uid: str, replica: str | None, tail: int,
                         since: int | None) -> ModelLog:
    """The tail of one replica's log (the first replica unless ``replica`` names one by index or uid)."""
    try:
        uid = validate_model_name(model_uid, "model_uid")
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="model_uid") from None
    data: dict[str, Any] = await supervisor.model_log(uid, replica, tail, since)
    return ModelLog.model_validate(data)
