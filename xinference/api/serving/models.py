"""What the model-management routes do: launch, list, describe, terminate (through the supervisor)."""

from __future__ import annotations

import logging
from typing import Any

from xinference.api.protocol.models import AddReplicasRequest, LaunchModelRequest
from xinference.api.route_cache import RouteTable

__all__ = ["ModelsService"]

logger = logging.getLogger(__name__)


class ModelsService:
    """Control-plane operations; each one is a call to the supervisor plus a route-cache update."""

    def __init__(self, supervisor: Any, routes: RouteTable) -> None:
        self._supervisor = supervisor
        self._routes = routes

    async def launch(self, body: LaunchModelRequest, wait_ready: bool = True) -> dict[str, Any]:
        """Launch; with ``wait_ready=False`` the decisions (and their 4xx) still happen now, and the call returns
        as soon as the model is reserved: follow it with ``/progress`` and ``/events``."""
        info: dict[str, Any] = await self._supervisor.launch_model(body.to_launch(), wait_ready)
        self._routes.invalidate()
        return {"model_uid": info["model_uid"], "model_engine": info["model_engine"], "status": info["status"]}

    async def list(self) -> dict[str, Any]:
        return {"object": "list", "data": await self._supervisor.list_models()}

    async def describe(self, model_uid: str) -> dict[str, Any]:
        info: dict[str, Any] = await self._supervisor.describe_model(model_uid)
        return info

    async def progress(self, model_uid: str) -> dict[str, Any]:
        """``{"progress": 0.0-1.0}`` of a launch (the weights' download, per replica); 1.0 once ready."""
        return {"progress": float(await self._supervisor.launch_progress(model_uid))}

    async def cancel(self, model_uid: str) -> None:
        await self._supervisor.cancel_launch(model_uid)

    async def events(self, model_uid: str) -> dict[str, Any]:
        """What happened to the model: launch, replicas lost, died, restarted, adopted (oldest first)."""
        return {"model_uid": model_uid, "events": await self._supervisor.model_events(model_uid)}

    async def add_replicas(self, model_uid: str, body: AddReplicasRequest) -> dict[str, Any]:
        result: dict[str, Any] = await self._supervisor.add_replicas(
            model_uid, body.replica, body.n_gpu, body.worker_ip()
        )
        self._routes.invalidate()
        return result

    async def remove_replica(self, model_uid: str, replica_id: int) -> dict[str, Any]:
        remaining = await self._supervisor.remove_replica(model_uid, replica_id)
        self._routes.invalidate()
        return {"model_uid": model_uid, "remaining_replicas": remaining}

    async def terminate(self, model_uid: str) -> None:
        await self._supervisor.terminate_model(model_uid)
        self._routes.invalidate()
