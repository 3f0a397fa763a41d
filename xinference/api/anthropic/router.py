"""Routes of the Anthropic Messages API, under ``/v1`` and ``/anthropic/v1``: dispatch only.

Errors on these paths are answered in Anthropic's shape (see :mod:`xinference.api.errors`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from xinference.api.answer import answer, streamed_200
from xinference.api.anthropic.protocol import CountTokensRequest, Message, MessagesRequest, TokenCount
from xinference.api.anthropic.serving import MessagesService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> MessagesService:
    service: MessagesService = request.app.state.messages
    return service


@router.post(
    "/v1/messages",
    response_model=Message,
    responses=streamed_200("named events from `message_start` to `message_stop`"),
)
@router.post(
    "/anthropic/v1/messages",
    response_model=Message,
    responses=streamed_200("named events from `message_start` to `message_stop`"),
)
async def create_message(body: MessagesRequest, request: Request) -> Response:
    return await answer(request, body.stream, _service(request).create(body))


@router.post("/v1/messages/count_tokens", response_model=TokenCount)
@router.post("/anthropic/v1/messages/count_tokens", response_model=TokenCount)
async def count_tokens(body: CountTokensRequest, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).count_tokens(body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
