"""Route ``POST /v1/rerank``: dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from xinference.api.protocol.rerank import RerankList, RerankRequest
from xinference.api.serving.rerank import RerankService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> RerankService:
    service: RerankService = request.app.state.rerank
    return service


@router.post("/v1/rerank", response_model=RerankList)
async def rerank(body: RerankRequest, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).create(body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
