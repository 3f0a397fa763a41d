"""``GET /v1/engine_schemas[/{engine}]``: each engine's launch options as JSON schema (names, types, defaults), so
a form (the web UI's launch dialog) can be built from it.

The schemas come from the engines' own pydantic configs (``Engine.config_class``), the same classes that
validate the options at launch, so the form and the validation cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI

from xinference.engines.registry import engine_names, get_engine_class, resolve_engine_name

__all__ = ["attach_router", "engine_option_schema", "engine_option_schemas"]


# -- serving (no collaborator: the schemas come from the engine registry) ----------------------------------------------
def engine_option_schema(engine: str) -> dict[str, Any]:
    """One engine's options schema; an unknown engine is a 400 that lists the known ones."""
    cls = get_engine_class(resolve_engine_name(engine))
    schema: dict[str, Any] = cls.config_class.model_json_schema()
    return {
        "engine": cls.name,
        "model_types": sorted(cls.model_types),
        "model_formats": sorted(cls.model_formats),
        "schema": schema,
    }


def engine_option_schemas() -> dict[str, dict[str, Any]]:
    return {name: engine_option_schema(name) for name in engine_names()}


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


@router.get("/v1/engine_schemas")
async def all_engine_schemas() -> dict[str, dict[str, Any]]:
    return engine_option_schemas()


@router.get("/v1/engine_schemas/{engine}")
async def one_engine_schema(engine: str) -> dict[str, Any]:
    return engine_option_schema(engine)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
