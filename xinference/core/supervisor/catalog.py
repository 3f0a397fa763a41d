"""The supervisor's catalog side: custom registrations and the engine table (a plain part of the supervisor)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xinference.core.supervisor.records import Workers
from xinference.engines.matcher import engine_table
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.download import local_path
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

__all__ = ["Catalog"]

logger = logging.getLogger(__name__)


class Catalog:
    """Registrations go to ``registry``; the engine table is asked of the hardware ``workers`` report."""

    def __init__(self, registry: ModelRegistry, workers: Workers) -> None:
        self._registry = registry
        self._workers = workers

    async def register(self, model_type: str, family: dict[str, Any], persist: bool) -> None:
        parsed = ModelFamily.model_validate(family)
        if parsed.model_type.lower() != model_type.lower():
            raise InvalidRequest(
                f"the spec says model_type {parsed.model_type!r} but it was registered as {model_type!r}",
                param="model_type",
            )
        for spec in parsed.model_specs:
            if spec.bundled is not None and spec.bundled.resolver is not None:
                raise InvalidRequest("a bundled 'resolver' is only allowed in the built-in catalog", param="resolver")
            if spec.model_uri is not None:
                try:
                    local_path(spec.model_uri)
                except LaunchFailed as exc:
                    raise InvalidRequest(exc.message, param="model_uri") from None
        # persisting writes, fsyncs and renames a file: off the loop that also serves heartbeats and launches
        await asyncio.to_thread(self._registry.register, parsed, persist)
        logger.info("registered %s model %s (persist=%s)", parsed.model_type, parsed.model_name, persist)

    async def unregister(self, model_type: str, model_name: str) -> None:
        await asyncio.to_thread(self._registry.unregister, model_name, model_type)
        logger.info("unregistered %s", model_name)

    async def registrations(self, model_type: str, detailed: bool) -> list[dict[str, Any]]:
        result = []
        for family in self._registry.list(model_type):
            entry: dict[str, Any] = {
                "model_name": family.model_name,
                "is_builtin": self._registry.is_builtin(family.model_name),
            }
            if detailed:
                entry.update(family.model_dump(mode="json"))
            result.append(entry)
        return result

    async def registration(self, model_type: str, model_name: str) -> dict[str, Any]:
        family = self._registry.get(model_name, model_type)
        return {**family.model_dump(mode="json"), "is_builtin": self._registry.is_builtin(model_name)}

    async def engines(self, model_type: str | None, model_name: str) -> dict[str, Any]:
        """``GET /v1/engines``: per engine serving this model type, the params it accepts on some worker, or why
        not (per worker when they disagree)."""
        family = self._registry.get(model_name, model_type)
        workers = list(self._workers.values())
        return engine_table(self._registry.choices(family), [w.hardware for w in workers], [w.address for w in workers])
