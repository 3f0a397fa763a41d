"""Custom model registrations (Xinference-compatible): the request model, the service and the routes.

``POST /v1/model_registrations/{model_type}`` takes Xinference's payload; the service validates the family, then
asks the supervisor, which keeps the registrations.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xinference.api.errors import validation_message
from xinference.core.refs import SupervisorRef
from xinference.errors import InvalidRequest
from xinference.model.custom import from_xinference_json
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["MODEL_TYPES", "RegisterModelRequest", "RegistrationsService", "attach_router", "canonical_model_type"]

MODEL_TYPES = ("LLM", "embedding", "rerank", "audio", "image")


# -- protocol ----------------------------------------------------------------------------------------------------------
def canonical_model_type(value: str) -> str:
    """``llm`` → ``LLM``; an unknown type is a 400 listing the known ones."""
    for known in MODEL_TYPES:
        if known.lower() == value.lower():
            return known
    raise InvalidRequest(f"unknown model type {value[:40]!r}; use one of {', '.join(MODEL_TYPES)}", param="model_type")


class RegisterModelRequest(BaseModel):
    """``model`` is the family as a JSON string (as Xinference's client sends it) or as an object."""

    model_config = ConfigDict(extra="forbid")

    model: str | dict[str, Any]
    persist: bool = False
    worker_ip: str | None = Field(default=None, description="accepted for compatibility; must be null")

    def family(self) -> dict[str, Any]:
        if self.worker_ip:
            raise InvalidRequest("registering on one worker only is not supported", param="worker_ip")
        if isinstance(self.model, dict):
            return self.model
        try:
            data = json.loads(self.model)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"'model' is not valid JSON: {exc}", param="model") from None
        if not isinstance(data, dict):
            raise InvalidRequest("'model' must be a JSON object describing the model family", param="model")
        return data


# -- serving -----------------------------------------------------------------------------------------------------------
class RegistrationsService:
    def __init__(self, supervisor: SupervisorRef) -> None:
        self._supervisor = supervisor

    async def register(self, model_type: str, body: RegisterModelRequest) -> None:
        kind = canonical_model_type(model_type)
        data = from_xinference_json({"model_type": kind, **body.family()}, kind, _builtin_family)
        try:
            family = ModelFamily.model_validate(data)
        except ValidationError as exc:
            message, field = validation_message(list(exc.errors()))
            raise InvalidRequest(f"invalid model spec: {message}", param=field) from None
        await self._supervisor.register_model(kind, family.model_dump(mode="json"), body.persist)

    async def unregister(self, model_type: str, model_name: str) -> None:
        await self._supervisor.unregister_model(canonical_model_type(model_type), _name(model_name))

    async def list(self, model_type: str, detailed: bool) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._supervisor.list_registrations(
            canonical_model_type(model_type), detailed
        )
        return result

    async def get(self, model_type: str, model_name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._supervisor.get_registration(
            canonical_model_type(model_type), _name(model_name)
        )
        return result


@functools.cache
def _builtin_families() -> dict[str, ModelFamily]:
    from xinference.model.registry import load_builtin_families

    return {family.model_name: family for family in load_builtin_families()}


def _builtin_family(name: str) -> ModelFamily | None:
    """The built-in family a registration's ``model_family`` names, whose template and parsers it may reuse."""
    return _builtin_families().get(name)


def _name(value: str) -> str:
    try:
        return validate_model_name(value)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="model_name") from None


# -- routes ------------------------------------------------------------------------------------------------------------
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
