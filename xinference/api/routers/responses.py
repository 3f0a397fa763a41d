"""Routes of the OpenAI Responses API: dispatch only."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from xinference.api.protocol.responses import ResponsesRequest
from xinference.api.serving.responses import ResponsesService

__all__ = ["attach_router"]

router = APIRouter()
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _service(request: Request) -> ResponsesService:
    service: ResponsesService = request.app.state.responses
    return service


@router.post("/v1/responses")
async def create_response(body: ResponsesRequest, request: Request) -> Response:
    result = await _service(request).create(body)
    if isinstance(result, dict):
        return JSONResponse(result)
    return StreamingResponse(result, media_type="text/event-stream", headers=_SSE_HEADERS)


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, request: Request) -> dict[str, Any]:
    return _service(request).get(response_id)


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(response_id: str, request: Request, order: Literal["asc", "desc"] = "desc",
                           limit: int = Query(default=20, ge=1, le=100), after: str | None = None) -> dict[str, Any]:
    return _service(request).input_items(response_id, order, limit, after)


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, request: Request) -> dict[str, Any]:
    return _service(request).delete(response_id)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
