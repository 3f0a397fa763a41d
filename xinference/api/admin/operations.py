"""Operations routes: devices, launch history, and unloading or loading a model by hand.

``GET /metrics`` lives with its instruments in ``api/metrics.py``; keep-alive's automatic unload and load on
demand in ``api/gateway/keepalive.py``. The service only reads or asks the supervisor, and refreshes the route
table after a model's processes came or went.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request

from xinference.api.gateway.routes import RouteTable
from xinference.core.refs import SupervisorRef

__all__ = ["OperationsService", "attach_router"]


# -- serving -----------------------------------------------------------------------------------------------------------
class OperationsService:
    """Devices, launch history, unload and load, through the supervisor."""

    def __init__(self, supervisor: SupervisorRef, routes: RouteTable) -> None:
        self._supervisor = supervisor
        self._routes = routes

    async def devices(self) -> list[dict[str, Any]]:
        info: dict[str, Any] = await self._supervisor.cluster_info()
        devices: list[dict[str, Any]] = info.get("devices") or []
        return devices

    async def launch_history(self) -> list[dict[str, Any]]:
        history: list[dict[str, Any]] = await self._supervisor.launch_history()
        return history

    async def unload(self, model_uid: str) -> dict[str, Any]:
        info: dict[str, Any] = await self._supervisor.unload_model(model_uid, "unloaded on request")
        await self._routes.refresh()
        return info

    async def load(self, model_uid: str) -> dict[str, Any]:
        info: dict[str, Any] = await self._supervisor.load_model(model_uid)
        await self._routes.refresh()
        return info


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> OperationsService:
    return OperationsService(request.app.state.supervisor, request.app.state.routes)


@router.get("/v1/cluster/devices")
async def cluster_devices(request: Request) -> list[dict[str, Any]]:
    """Every worker's GPUs: index, name, memory total/used, and the replicas holding each."""
    return await _service(request).devices()


@router.get("/v1/launch_history")
async def launch_history(request: Request) -> list[dict[str, Any]]:
    """Launches that reached ready, newest first, with their request, autostart flag and status now."""
    return await _service(request).launch_history()


@router.post("/v1/models/{model_uid}/unload")
async def unload_model(model_uid: str, request: Request) -> dict[str, Any]:
    """End a serving model's processes now; it stays listed as ``unloaded`` and loads on its next request."""
    return await _service(request).unload(model_uid)


@router.post("/v1/models/{model_uid}/load")
async def load_model(model_uid: str, request: Request) -> dict[str, Any]:
    """Load an unloaded model again (returns once it serves; a serving model is returned as it is)."""
    return await _service(request).load(model_uid)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
