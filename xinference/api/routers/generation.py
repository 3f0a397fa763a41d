"""Routes ``POST /v1/chat/completions`` and ``POST /v1/completions``: dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

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


@router.post("/v1/chat/completions")
async def create_chat_completion(body: ChatCompletionRequest, request: Request) -> Response:
    return _respond(await _service(request).create("chat", body))


@router.post("/v1/completions")
async def create_completion(body: CompletionRequest, request: Request) -> Response:
    return _respond(await _service(request).create("completions", body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
