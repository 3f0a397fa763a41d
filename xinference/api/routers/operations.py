"""Operations routes (issue 12): devices, launch history, and unloading or loading a model by hand.

``GET /metrics`` lives with its instruments in ``api/metrics.py``; keep-alive's automatic unload and load on
demand in ``api/gateway/keepalive.py``. These routes only read or ask the supervisor.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request

__all__ = ["attach_router"]

router = APIRouter()


@router.get("/v1/cluster/devices")
async def cluster_devices(request: Request) -> list[dict[str, Any]]:
    """Every worker's GPUs: index, name, memory total/used, and the replicas holding each."""
    info: dict[str, Any] = await request.app.state.supervisor.cluster_info()
    devices: list[dict[str, Any]] = info.get("devices") or []
    return devices


@router.get("/v1/launch_history")
async def launch_history(request: Request) -> list[dict[str, Any]]:
    """Launches that reached ready, newest first, with their request, autostart flag and status now."""
    history: list[dict[str, Any]] = await request.app.state.supervisor.launch_history()
    return history


@router.post("/v1/models/{model_uid}/unload")
async def unload_model(model_uid: str, request: Request) -> dict[str, Any]:
    """End a serving model's processes now; it stays listed as ``unloaded`` and loads on its next request."""
    info: dict[str, Any] = await request.app.state.supervisor.unload_model(model_uid, "unloaded on request")
    await request.app.state.routes.refresh()
    return info


@router.post("/v1/models/{model_uid}/load")
async def load_model(model_uid: str, request: Request) -> dict[str, Any]:
    """Load an unloaded model again (returns once it serves; a serving model is returned as it is)."""
    info: dict[str, Any] = await request.app.state.supervisor.load_model(model_uid)
    await request.app.state.routes.refresh()
    return info


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
