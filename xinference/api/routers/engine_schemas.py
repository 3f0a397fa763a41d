"""``GET /v1/engine_schemas[/{engine}]``: each engine's launch options as JSON schema (names, types, defaults)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI

from xinference.api.serving.engine_schemas import engine_option_schema, engine_option_schemas

__all__ = ["attach_router"]

router = APIRouter()


@router.get("/v1/engine_schemas")
async def all_engine_schemas() -> dict[str, dict[str, Any]]:
    return engine_option_schemas()


@router.get("/v1/engine_schemas/{engine}")
async def one_engine_schema(engine: str) -> dict[str, Any]:
    return engine_option_schema(engine)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
