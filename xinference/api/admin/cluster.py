"""Cluster-level routes: health, the auth probe, the version, the supervisor's address and info, workers and
cluster info.

The service reads what the app was started with (its API keys, the supervisor's address) and asks the supervisor
the rest.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request

from xinference import __version__
from xinference.core.refs import SupervisorRef
from xinference.errors import ModelUnavailable

__all__ = ["ClusterService", "attach_router"]


# -- serving -----------------------------------------------------------------------------------------------------------
class ClusterService:
    """What the cluster routes answer."""

    def __init__(self, supervisor: SupervisorRef | None, supervisor_address: str, api_keys: frozenset[str]) -> None:
        self._supervisor = supervisor
        self._address = supervisor_address
        self._api_keys = api_keys

    def status(self) -> dict[str, Any]:
        return {"status": "ok"}

    def auth(self) -> dict[str, Any]:
        return {"auth": bool(self._api_keys)}

    def version(self) -> dict[str, Any]:
        return {"version": __version__}

    def address(self) -> str:
        return self._address

    def supervisor(self) -> dict[str, Any]:
        """Xinference's ``GET /v1/supervisor``: the supervisor's internal (xoscar) address."""
        return {"supervisor_ip": self._address}

    def _reached(self) -> SupervisorRef:
        if self._supervisor is None:  # the app runs without its lifespan (a test's client): nothing to reach
            raise ModelUnavailable("the supervisor is not reachable yet", retry_after=1.0)
        return self._supervisor

    async def workers(self) -> list[dict[str, Any]]:
        """Every worker (address, hardware, seconds since its heartbeat), plus Xinference's two fields:
        ``work-ip`` (its address) and ``models`` (the replicas it runs, by replica uid)."""
        supervisor = self._reached()
        workers = await supervisor.list_workers()
        models = await supervisor.list_models()
        for worker in workers:
            worker["work-ip"] = worker["address"]
            worker["models"] = {
                replica["replica_uid"]: {
                    "model_uid": info.get("model_uid"),
                    "model_name": info.get("model_name"),
                    "model_type": info.get("model_type"),
                    "model_engine": info.get("model_engine"),
                    "address": replica.get("address"),
                }
                for info in models
                for replica in info.get("replicas") or []
                if replica.get("worker_address") == worker["address"]
            }
        return workers

    async def info(self) -> dict[str, Any]:
        return await self._reached().cluster_info()


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> ClusterService:
    """Built per request from the app's state: ``/status`` and the auth probe answer before the supervisor is
    reached (no lifespan needed), and the service holds nothing but references."""
    state = request.app.state
    return ClusterService(getattr(state, "supervisor", None), state.supervisor_address, state.api_keys)


@router.get("/status")
async def status(request: Request) -> dict[str, Any]:
    return _service(request).status()


@router.get("/v1/cluster/auth")
async def cluster_auth(request: Request) -> dict[str, Any]:
    """Probed by the official client before anything else: is an API key needed?"""
    return _service(request).auth()


@router.get("/v1/cluster/version")
async def cluster_version(request: Request) -> dict[str, Any]:
    """The server's version (shown by the web UI; the original Xinference has the same route)."""
    return _service(request).version()


@router.get("/v1/address")
async def supervisor_address(request: Request) -> str:
    return _service(request).address()


@router.get("/v1/supervisor")
async def supervisor_info(request: Request) -> dict[str, Any]:
    return _service(request).supervisor()


@router.get("/v1/workers")
async def list_workers(request: Request) -> list[dict[str, Any]]:
    return await _service(request).workers()


@router.get("/v1/cluster/info")
async def cluster_info(request: Request) -> dict[str, Any]:
    return await _service(request).info()


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
