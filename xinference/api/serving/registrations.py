"""What the model-registration routes do: validate, then ask the supervisor."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import ValidationError

from xinference.api.errors import validation_message
from xinference.api.protocol.registrations import RegisterModelRequest, canonical_model_type
from xinference.errors import InvalidRequest
from xinference.model.custom import from_xinference_json
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["RegistrationsService"]


class RegistrationsService:
    def __init__(self, supervisor: Any) -> None:
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
