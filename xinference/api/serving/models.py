"""What the model-management routes do: launch, list, describe, terminate (through the supervisor)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xinference.api.protocol.models import LaunchModelRequest
from xinference.api.route_cache import RouteTable

__all__ = ["ModelsService"]

logger = logging.getLogger(__name__)


class ModelsService:
    """Control-plane operations; each one is a call to the supervisor plus a route-cache update."""

    def __init__(self, supervisor: Any, routes: RouteTable) -> None:
        self._supervisor = supervisor
        self._routes = routes
        self._launches: set[asyncio.Task[Any]] = set()

    async def launch(self, body: LaunchModelRequest, wait_ready: bool = True) -> dict[str, Any]:
        launch = body.to_launch()
        if not wait_ready:
            task = asyncio.get_running_loop().create_task(self._launch_logged(launch))
            self._launches.add(task)
            task.add_done_callback(self._launches.discard)
            return {"model_uid": launch["model_uid"] or launch["model_name"], "status": "launching"}
        info: dict[str, Any] = await self._supervisor.launch_model(launch)
        self._routes.invalidate()
        return {"model_uid": info["model_uid"], "model_engine": info["model_engine"], "status": "ready"}

    async def _launch_logged(self, launch: dict[str, Any]) -> None:
        try:
            await self._supervisor.launch_model(launch)
            self._routes.invalidate()
        except Exception as exc:  # noqa: BLE001 - nobody awaits a background launch: its failure is logged
            logger.error("background launch of %s failed: %s", launch["model_name"], exc)

    async def list(self) -> dict[str, Any]:
        return {"object": "list", "data": await self._supervisor.list_models()}

    async def describe(self, model_uid: str) -> dict[str, Any]:
        info: dict[str, Any] = await self._supervisor.describe_model(model_uid)
        return info

    async def terminate(self, model_uid: str) -> None:
        await self._supervisor.terminate_model(model_uid)
        self._routes.invalidate()
