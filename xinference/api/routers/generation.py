"""Routes ``POST /v1/chat/completions`` and ``POST /v1/completions``: dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from xinference.api.disconnect import until_disconnect
from xinference.api.protocol.generation import ChatCompletionRequest, CompletionRequest
from xinference.api.serving.generation import GenerationService

__all__ = ["attach_router"]

router = APIRouter()
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _service(request: Request) -> GenerationService:
    service: GenerationService = request.app.state.generation
    return service


def _respond(result: object) -> Response:
    if isinstance(result, dict):
        return JSONResponse(result)
    return StreamingResponse(result, media_type="text/event-stream", headers=_SSE_HEADERS)  # type: ignore[arg-type]


#: what a request whose client left is answered (nobody reads it; access logs and metrics show it)
_CLIENT_GONE = 499


async def _create(request: Request, kind: str, body: ChatCompletionRequest | CompletionRequest) -> Response:
    if body.stream:  # a stream notices the disconnect itself
        return _respond(await _service(request).create(kind, body))  # type: ignore[arg-type]
    result, gone = await until_disconnect(request, _service(request).create(kind, body))  # type: ignore[arg-type]
    return Response(status_code=_CLIENT_GONE) if gone else _respond(result)


@router.post("/v1/chat/completions")
async def create_chat_completion(body: ChatCompletionRequest, request: Request) -> Response:
    return await _create(request, "chat", body)


@router.post("/v1/completions")
async def create_completion(body: CompletionRequest, request: Request) -> Response:
    return await _create(request, "completions", body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
