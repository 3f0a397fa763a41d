"""Route ``POST /v1/embeddings``: dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from xinference.api.protocol.embeddings import EmbeddingList, EmbeddingRequest
from xinference.api.serving.embeddings import EmbeddingService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> EmbeddingService:
    service: EmbeddingService = request.app.state.embeddings
    return service


@router.post("/v1/embeddings", response_model=EmbeddingList)
async def create_embedding(body: EmbeddingRequest, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).create(body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
