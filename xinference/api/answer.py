"""What the generation routes (chat, completions, Messages, Responses) share when they answer.

A result is either a whole body (a dict: JSON, sent as the engine made it, without re-validation, since these
bodies can be large and are on every request's path; the routes' ``response_model`` documents them) or an async
iterator of SSE bytes (a ``text/event-stream`` response). A non-streamed request whose client disconnects before
the answer is ready is cancelled, so the engine stops generating for nobody (a stream notices that by itself).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Union

from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import Request

from xinference.api.gateway.disconnect import until_disconnect

__all__ = ["CLIENT_GONE", "answer", "respond", "streamed_200"]

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: what a request whose client left is answered (nobody reads it; access logs and metrics show it)
CLIENT_GONE = 499

Result = Union[dict[str, Any], AsyncIterator[bytes]]


def streamed_200(what: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses=`` entry saying that a 200 is an event stream when the request set ``stream``
    (the JSON body of a 200 comes from the route's ``response_model``)."""
    return {
        200: {
            "description": f"the whole body; with `stream: true`, {what}",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    }


def respond(result: Result) -> Response:
    """A dict as JSON, an iterator of SSE bytes as an event stream."""
    if isinstance(result, dict):
        return JSONResponse(result)
    return StreamingResponse(result, media_type="text/event-stream", headers=_SSE_HEADERS)


async def answer(request: Request, stream: bool, work: Awaitable[Result]) -> Response:
    """Await ``work`` and respond with it; when not streamed, cancel it if the client leaves first (a 499)."""
    if stream:
        return respond(await work)
    result, gone = await until_disconnect(request, work)
    if gone or result is None:
        return Response(status_code=CLIENT_GONE)
    return respond(result)
