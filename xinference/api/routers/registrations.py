"""Routes of custom model registrations (Xinference-compatible): dispatch only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request

from xinference.api.protocol.registrations import RegisterModelRequest
from xinference.api.serving.registrations import RegistrationsService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> RegistrationsService:
    service: RegistrationsService = request.app.state.registrations
    return service


@router.post("/v1/model_registrations/{model_type}")
async def register_model(model_type: str, body: RegisterModelRequest, request: Request) -> dict[str, Any]:
    await _service(request).register(model_type, body)
    return {}


@router.get("/v1/model_registrations/{model_type}")
async def list_registrations(model_type: str, request: Request, detailed: bool = False) -> list[dict[str, Any]]:
    return await _service(request).list(model_type, detailed)


@router.get("/v1/model_registrations/{model_type}/{model_name}")
async def get_registration(model_type: str, model_name: str, request: Request) -> dict[str, Any]:
    return await _service(request).get(model_type, model_name)


@router.delete("/v1/model_registrations/{model_type}/{model_name}")
async def unregister_model(model_type: str, model_name: str, request: Request) -> dict[str, Any]:
    await _service(request).unregister(model_type, model_name)
    return {}


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
