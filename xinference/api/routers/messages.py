"""Routes of the Anthropic Messages API, under ``/v1`` and ``/anthropic/v1``: dispatch only.

Errors on these paths are answered in Anthropic's shape (see :mod:`xinference.api.errors`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from xinference.api.protocol.anthropic import CountTokensRequest, MessagesRequest
from xinference.api.serving.messages import MessagesService

__all__ = ["attach_router"]

router = APIRouter()
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _service(request: Request) -> MessagesService:
    service: MessagesService = request.app.state.messages
    return service


@router.post("/v1/messages")
@router.post("/anthropic/v1/messages")
async def create_message(body: MessagesRequest, request: Request) -> Response:
    result = await _service(request).create(body)
    if isinstance(result, dict):
        return JSONResponse(result)
    return StreamingResponse(result, media_type="text/event-stream", headers=_SSE_HEADERS)


@router.post("/v1/messages/count_tokens")
@router.post("/anthropic/v1/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, request: Request) -> dict[str, Any]:
    return await _service(request).count_tokens(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
