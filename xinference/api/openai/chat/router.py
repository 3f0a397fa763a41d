"""Routes ``POST /v1/chat/completions`` and ``POST /v1/completions``: dispatch only."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from xinference.api.answer import answer, streamed_200
from xinference.api.openai.chat.protocol import ChatCompletion, ChatCompletionRequest, Completion, CompletionRequest
from xinference.api.openai.chat.serving import GenerationService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> GenerationService:
    service: GenerationService = request.app.state.generation
    return service


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    responses=streamed_200("`chat.completion.chunk` frames, then `data: [DONE]`"),
)
async def create_chat_completion(body: ChatCompletionRequest, request: Request) -> Response:
    return await answer(request, body.stream, _service(request).create("chat", body))


@router.post(
    "/v1/completions",
    response_model=Completion,
    responses=streamed_200("`text_completion` frames, then `data: [DONE]`"),
)
async def create_completion(body: CompletionRequest, request: Request) -> Response:
    return await answer(request, body.stream, _service(request).create("completions", body))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
