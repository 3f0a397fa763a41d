"""Shapes of the model-cache routes: ``GET /v1/cache/models`` and ``DELETE /v1/cache/models``.

An entry is one downloaded repository revision on one worker (see :mod:`xinference.model.cache`); its ``id``
(``huggingface/org--name/main``) is what ``DELETE /v1/cache/models?entry=ID`` takes. ``?model_name=NAME`` instead
removes every entry that model was launched from. The list answer uses Xinference's ``{"list": [...]}`` shape.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["CacheEntry", "CacheList", "RemovedEntry", "RemovedList"]


class CacheEntry(BaseModel):
    id: str = Field(description="hub/org--repo/revision, or bundled/<package>")
    hub: str
    repo_id: str
    revision: str | None = None
    commit: str | None = None
    model_names: list[str] = Field(default_factory=list, description="models launched from this entry")
    files: list[str] = Field(default_factory=list)
    size_bytes: int = 0
    partial_bytes: int = Field(default=0, description="bytes of transfers not finished yet (resumed next launch)")
    updated: int | None = None
    path: str
    worker: str


class CacheList(BaseModel):
    list: list[CacheEntry]


class RemovedEntry(BaseModel):
    id: str
    freed_bytes: int
    worker: str


class RemovedList(BaseModel):
    removed: list[RemovedEntry]
