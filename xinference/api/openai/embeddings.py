"""``POST /v1/embeddings`` (OpenAI's shape): the request and response models, the service and the route.

``input`` is a string, a list of strings, a list of token ids, or a list of token-id lists; the request normalises
it into a list of items (strings or token-id lists) for the engine. The service checks the model can embed, then
makes one call to its model actor. The engine batches concurrent requests itself, so this layer adds no queueing;
it only picks the least busy replica. No engine, torch or xoscar imports here.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import Field, field_validator

from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import Route, RouteTable
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.errors import WrongModelType

__all__ = [
    "MAX_EMBEDDING_INPUTS",
    "EmbeddingList",
    "EmbeddingRequest",
    "EmbeddingService",
    "attach_router",
    "check_model_type",
]

#: OpenAI's own limit on the number of inputs of one request.
MAX_EMBEDDING_INPUTS = 2048

EmbeddingInput = Union[str, list[str], list[int], list[list[int]]]


# -- protocol ----------------------------------------------------------------------------------------------------------
class EmbeddingRequest(OpenAIRequest):
    """``POST /v1/embeddings``."""

    input: EmbeddingInput
    model: str = Field(min_length=1)
    dimensions: int | None = Field(default=None, ge=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("input")
    @classmethod
    def _input(cls, value: EmbeddingInput) -> list[Union[str, list[int]]]:
        items: list[Union[str, list[int]]]
        if isinstance(value, str):
            items = [value]
        elif value and all(isinstance(v, int) for v in value):
            items = [list(value)]  # type: ignore[arg-type]  # one token array
        else:
            items = list(value)  # type: ignore[arg-type]
        if not items:
            raise ValueError("input must not be empty")
        if len(items) > MAX_EMBEDDING_INPUTS:
            raise ValueError(f"at most {MAX_EMBEDDING_INPUTS} inputs per request")
        for index, item in enumerate(items):
            if isinstance(item, str) and not item:
                raise ValueError(f"input[{index}] is an empty string")
            if isinstance(item, list) and not item:
                raise ValueError(f"input[{index}] is an empty token list")
        return items

    def to_engine_params(self) -> dict[str, Any]:
        return {"input": self.input, "encoding_format": self.encoding_format, "dimensions": self.dimensions}


class Embedding(ResponseBody):
    object: Literal["embedding"]
    index: int
    embedding: Union[list[float], str] = Field(
        description="floats, or base64 of little-endian float32 with encoding_format=base64"
    )


class EmbeddingUsage(ResponseBody):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(ResponseBody):
    """The body of ``POST /v1/embeddings``: one vector per input, in input order."""

    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


# -- serving -----------------------------------------------------------------------------------------------------------
def check_model_type(route: Route, model_type: str, ability: str, what: str) -> None:
    """WrongModelType (400) naming the model's type and the operation when ``route`` cannot do ``what``."""
    if route.model_type != model_type or ability not in route.model_ability:
        raise WrongModelType(
            f"model {route.model_uid!r} is {_a(route.model_type)} {route.model_type} model with abilities "
            f"{', '.join(route.model_ability)}; it cannot serve {what} (that needs {_a(model_type)} {model_type} "
            f"model with the {ability} ability)",
            param="model",
        )


def _a(word: str) -> str:
    """The indefinite article before ``word`` ("an audio model", "a rerank model")."""
    return "an" if word[:1].lower() in "aeiou" else "a"


class EmbeddingService:
    """Runs embedding requests against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes

    async def create(self, body: EmbeddingRequest) -> dict[str, Any]:
        route = await self._routes.get(body.model)
        check_model_type(route, "embedding", "embed", "embeddings")
        params = body.to_engine_params()
        note_keep_alive(self._routes, route, body.keep_alive)
        result, _ = await self._routes.call(route, lambda replica: replica.ref.embed(params))
        return result


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> EmbeddingService:
    service: EmbeddingService = request.app.state.embeddings
    return service


@router.post("/v1/embeddings", response_model=EmbeddingList)
async def create_embedding(body: EmbeddingRequest, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).create(body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
