"""Routes of the OpenAI Responses API: dispatch only."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from xinference.api.answer import answer, streamed_200
from xinference.api.openai.responses.protocol import DeletedResponse, InputItemList, ResponseObject, ResponsesRequest
from xinference.api.openai.responses.serving import ResponsesService

__all__ = ["attach_router"]

router = APIRouter()


def _service(request: Request) -> ResponsesService:
    service: ResponsesService = request.app.state.responses
    return service


@router.post(
    "/v1/responses",
    response_model=ResponseObject,
    responses=streamed_200("named events from `response.created` to `response.completed`"),
)
async def create_response(body: ResponsesRequest, request: Request) -> Response:
    return await answer(request, body.stream, _service(request).create(body))


@router.get("/v1/responses/{response_id}", response_model=ResponseObject)
async def get_response(response_id: str, request: Request) -> JSONResponse:
    return JSONResponse(_service(request).get(response_id))


@router.get("/v1/responses/{response_id}/input_items", response_model=InputItemList)
async def list_input_items(
    response_id: str,
    request: Request,
    order: Literal["asc", "desc"] = "desc",
    limit: int = Query(default=20, ge=1, le=100),
    after: str | None = None,
) -> JSONResponse:
    return JSONResponse(_service(request).input_items(response_id, order, limit, after))


@router.delete("/v1/responses/{response_id}", response_model=DeletedResponse)
async def delete_response(response_id: str, request: Request) -> JSONResponse:
    return JSONResponse(_service(request).delete(response_id))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
