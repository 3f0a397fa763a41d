"""Cluster-level routes: health, auth probe, workers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request

from xinference import __version__

__all__ = ["attach_router"]

router = APIRouter()


@router.get("/status")
async def status() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/v1/cluster/auth")
async def cluster_auth(request: Request) -> dict[str, Any]:
    """Probed by the official client before anything else: is an API key needed?"""
    return {"auth": bool(request.app.state.api_keys)}


@router.get("/v1/cluster/version")
async def cluster_version() -> dict[str, Any]:
    """The server's version (shown by the web UI; the original Xinference has the same route)."""
    return {"version": __version__}


@router.get("/v1/address")
async def supervisor_address(request: Request) -> str:
    address: str = request.app.state.supervisor_address
    return address


@router.get("/v1/workers")
async def list_workers(request: Request) -> list[dict[str, Any]]:
    workers: list[dict[str, Any]] = await request.app.state.supervisor.list_workers()
    return workers


@router.get("/v1/cluster/info")
async def cluster_info(request: Request) -> dict[str, Any]:
    info: dict[str, Any] = await request.app.state.supervisor.cluster_info()
    return info


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
