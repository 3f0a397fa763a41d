"""The model table: every launched model's record by uid, and the version the API's route cache follows.

One table, shared by the parts that change it (the launcher, scaling, membership, unload/load) and the ones that
read it (inspection, autostart). Whoever changes what a route or a listing shows calls :meth:`ModelTable.changed`:
the version moves and the API's route cache refreshes at its next look. Plain data, no actor: every part is tested
over a table built in the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from xinference.core.supervisor.records import ModelRecord
from xinference.errors import ModelNotFound

__all__ = ["ModelTable"]


class ModelTable:
    """uid -> :class:`ModelRecord` of every model launching, serving, unloaded or failed, and the change counter."""

    def __init__(self, records: dict[str, ModelRecord] | None = None) -> None:
        self.records: dict[str, ModelRecord] = {} if records is None else records
        #: moves with every change a route or a listing shows; the API refreshes its routes when it moved
        self.version = 0

    def changed(self) -> None:
        self.version += 1

    def __contains__(self, model_uid: object) -> bool:
        return model_uid in self.records

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.records))

    def __len__(self) -> int:
        return len(self.records)

    def find(self, model_uid: str) -> ModelRecord | None:
        """The record of ``model_uid``, or None when no such model is listed."""
        return self.records.get(model_uid)

    def get(self, model_uid: str) -> ModelRecord:
        """The record of ``model_uid``; ModelNotFound (404) when no such model is listed."""
        record = self.records.get(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running or launching", param="model_uid")
        return record

    def holds(self, model_uid: str, record: ModelRecord) -> bool:
        """Whether ``record`` still holds ``model_uid`` (a terminate, or a relaunch after it, may have replaced it)."""
        return self.records.get(model_uid) is record

    def add(self, record: ModelRecord) -> None:
        self.records[record.model_uid] = record

    def remove(self, model_uid: str) -> ModelRecord | None:
        """Take ``model_uid`` out of the table; returns its record, or None when it was not listed."""
        return self.records.pop(model_uid, None)

    def events(self, model_uid: str) -> list[dict[str, Any]]:
        """``GET /v1/models/{uid}/events``: what happened to the model, oldest first."""
        record = self.records.get(model_uid)
        if record is None:
            raise ModelNotFound(f"model {model_uid!r} is not running", param="model_uid")
        return list(record.events)

    def infos(self) -> list[dict[str, Any]]:
        return [r.info() for r in self.records.values()]

    def routes(self) -> tuple[int, dict[str, dict[str, Any]]]:
        """(version, uid -> route) for the API's cache; a model still launching is listed without replicas."""
        return self.version, {uid: r.route() for uid, r in self.records.items()}
