"""``POST /v1/rerank`` (the Jina / Cohere shape, as Xinference serves it): models, service and route.

``documents`` are strings or ``{"text": ...}`` objects; they reach the engine as plain strings. The service checks
the model can rerank, then makes one call to its model actor (which batches). No engine, torch or xoscar imports
here.
"""

from __future__ import annotations

from typing import Any, Union

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import RouteTable
from xinference.api.openai.embeddings import check_model_type
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.errors import UnsupportedOption

__all__ = ["MAX_RERANK_DOCUMENTS", "RerankDocument", "RerankList", "RerankRequest", "RerankService", "attach_router"]

MAX_RERANK_DOCUMENTS = 10_000


# -- protocol ----------------------------------------------------------------------------------------------------------
class RerankDocument(BaseModel):
    """A document given as an object (Cohere accepts ``{"text": ...}``)."""

    model_config = ConfigDict(extra="allow")

    text: str


class RerankRequest(OpenAIRequest):
    """``POST /v1/rerank``."""

    model: str = Field(min_length=1)
    query: str = Field(min_length=1)
    documents: list[Union[str, RerankDocument]] = Field(min_length=1, max_length=MAX_RERANK_DOCUMENTS)
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool | None = None
    # -- Xinference extensions -------------------------------------------------------------------------------
    return_len: bool | None = None
    max_chunks_per_doc: int | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: list[Union[str, RerankDocument]]) -> list[str]:
        texts = [d if isinstance(d, str) else d.text for d in value]
        for index, text in enumerate(texts):
            if not text:
                raise ValueError(f"documents[{index}] is empty")
        return texts

    def to_engine_params(self) -> dict[str, Any]:
        if self.max_chunks_per_doc not in (None, 1):
            raise UnsupportedOption(
                "max_chunks_per_doc (splitting long documents) is not supported; documents "
                "longer than the model's input are truncated",
                param="max_chunks_per_doc",
            )
        return {
            "query": self.query,
            "documents": list(self.documents),
            "top_n": self.top_n,
            "return_documents": bool(self.return_documents),
        }


class RerankResult(ResponseBody):
    index: int = Field(description="the document's position in the request")
    relevance_score: float
    document: RerankDocument | None = Field(default=None, description="with return_documents=true")


class RerankList(ResponseBody):
    """The body of ``POST /v1/rerank``: the documents best first (the ``top_n`` best when given)."""

    id: str
    results: list[RerankResult]
    meta: dict[str, Any] | None = None


# -- serving -----------------------------------------------------------------------------------------------------------
class RerankService:
    """Runs rerank requests against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes

    async def create(self, body: RerankRequest) -> dict[str, Any]:
        route = await self._routes.get(body.model)
        check_model_type(route, "rerank", "rerank", "rerank requests")
        params = body.to_engine_params()
        note_keep_alive(self._routes, route, body.keep_alive)
        result, _ = await self._routes.call(route, lambda replica: replica.ref.rerank(params))
        return result


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> RerankService:
    service: RerankService = request.app.state.rerank
    return service


@router.post("/v1/rerank", response_model=RerankList)
async def rerank(body: RerankRequest, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).create(body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
