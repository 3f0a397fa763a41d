"""Routes for launching, listing, describing and terminating models: dispatch only."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import Response

from xinference.api.admin.models.protocol import AddReplicasRequest, LaunchModelRequest, ModelCard, ModelList
from xinference.api.admin.models.serving import ModelsService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> ModelsService:
    service: ModelsService = request.app.state.models
    return service


@router.post("/v1/models")
async def launch_model(body: LaunchModelRequest, request: Request, wait_ready: bool = True) -> dict[str, Any]:
    return await _service(request).launch(body, wait_ready=wait_ready)


def _json(content: Any) -> Response:
    """``content`` as a JSON response, encoded in one ``json.dumps`` pass.

    Used for the model list and cards: their entries are the supervisor's plain dicts (``ModelRecord.info``), and
    ``jsonable_encoder`` walking every nested value cost ~1.7 s per listing at 1,000 models
    (``benchmark/results/scale.md``). A value JSON cannot encode (an engine reporting a ``Path`` in its config,
    say) is converted by ``jsonable_encoder`` alone; the routes' ``response_model`` still documents the body.
    """
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=jsonable_encoder)
    return Response(body.encode("utf-8"), media_type="application/json")


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> Response:
    return _json(await _service(request).list())


@router.get("/v1/models/instances")
async def instance_info(request: Request, model_name: str | None = None, model_uid: str | None = None) -> Response:
    """Xinference's instance records (before ``/v1/models/{model_uid}``, which would take ``instances`` for a uid)."""
    return _json(await _service(request).instances(model_name, model_uid))


@router.get("/v1/models/{model_uid}", response_model=ModelCard)
async def describe_model(model_uid: str, request: Request) -> Response:
    return _json(await _service(request).describe(model_uid))


@router.get("/v1/models/{model_uid}/progress")
async def launch_progress(model_uid: str, request: Request) -> dict[str, Any]:
    return await _service(request).progress(model_uid)


@router.post("/v1/models/{model_uid}/cancel")
async def cancel_launch(model_uid: str, request: Request) -> dict[str, Any]:
    await _service(request).cancel(model_uid)
    return {"model_uid": model_uid, "cancelled": True}


@router.get("/v1/models/{model_uid}/events")
async def model_events(model_uid: str, request: Request) -> dict[str, Any]:
    return await _service(request).events(model_uid)


@router.post("/v1/models/{model_uid}/replicas")
async def add_replicas(model_uid: str, body: AddReplicasRequest, request: Request) -> dict[str, Any]:
    return await _service(request).add_replicas(model_uid, body)


@router.delete("/v1/models/{model_uid}/replicas/{replica_id}")
async def remove_replica(model_uid: str, replica_id: int, request: Request) -> dict[str, Any]:
    return await _service(request).remove_replica(model_uid, replica_id)


@router.delete("/v1/models/{model_uid}")
async def terminate_model(model_uid: str, request: Request) -> dict[str, Any]:
    await _service(request).terminate(model_uid)
    return {"model_uid": model_uid, "terminated": True}


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
