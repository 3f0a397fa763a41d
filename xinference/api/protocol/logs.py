"""Response shape of ``GET /v1/models/{uid}/logs`` (the web UI's Logs page and ``xinference logs``)."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["ModelLog"]


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
