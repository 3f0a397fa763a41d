"""The API's one error envelope, and the only place exceptions become HTTP responses.

Every non-2xx body is ``{"error": {"message", "type", "param", "code"}, "detail": message}``: OpenAI's shape, plus
``detail`` because the official Xinference client reads its error text from there. The Anthropic Messages routes
(``/v1/messages...``, ``/anthropic/...``) answer in Anthropic's shape instead,
``{"type": "error", "error": {"type", "message"}}``, because the Anthropic SDK reads that one.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from xinference.api.sse import encode_events, encode_frames
from xinference.errors import InvalidRequest, XinferenceError

__all__ = [
    "anthropic_error_body",
    "anthropic_error_event",
    "error_body",
    "error_frame",
    "install_error_handlers",
    "uses_anthropic_shape",
    "validation_message",
]

logger = logging.getLogger(__name__)

_HTTP_TYPES = {401: "authentication_error", 404: "not_found_error", 405: "invalid_request_error"}
#: Paths whose errors take Anthropic's shape: the Messages API under both of its prefixes.
_ANTHROPIC_PREFIXES = ("/v1/messages", "/anthropic/")
#: Anthropic's error types by HTTP status (anything else of 5xx is ``api_error``, of 4xx ``invalid_request_error``).
_ANTHROPIC_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_body(
    message: str, error_type: str, *, param: str | None = None, code: str | int | None = None
) -> dict[str, Any]:
    """Build the error envelope (the only function that does)."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}, "detail": message}


def uses_anthropic_shape(path: str) -> bool:
    """Whether errors on ``path`` are answered in Anthropic's shape (the Messages API's routes)."""
    return path.startswith(_ANTHROPIC_PREFIXES)


def anthropic_error_body(message: str, status: int) -> dict[str, Any]:
    """Anthropic's error envelope for an error of HTTP ``status`` (the only function that builds it)."""
    kind = _ANTHROPIC_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_error_event(exc: XinferenceError) -> bytes:
    """An ``event: error`` SSE event, for failures after a Messages stream has started."""
    return encode_events([("error", anthropic_error_body(exc.message, exc.status_code))])


def _shaped(path: str, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    """``body`` (the OpenAI envelope), or its Anthropic equivalent on the Messages routes."""
    if uses_anthropic_shape(path):
        body = anthropic_error_body(str(body["error"]["message"]), status)
    return JSONResponse(body, status_code=status, headers=headers)


def error_frame(exc: XinferenceError) -> bytes:
    """An SSE frame carrying an error, for failures after a stream has started (framed by :mod:`.sse`, the one
    encoder of ``data:`` lines)."""
    return encode_frames([error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)])


def _response(exc: XinferenceError, path: str = "") -> JSONResponse:
    body = error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)
    retry = exc.retry_after
    headers = {"Retry-After": str(max(1, int(retry + 0.999)))} if retry is not None else None
    return _shaped(path, exc.status_code, body, headers)


def validation_message(errors: list[Any]) -> tuple[str, str | None]:
    """A one-line message naming the first bad field, and that field's dotted path."""
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    field = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return f"the request body is not valid JSON: {first.get('ctx', {}).get('error', first.get('msg'))}", None
    if first.get("type") == "missing":
        return f"missing required field {field!r}", field
    if field is None:
        return f"invalid request body: {first.get('msg', 'unreadable')}", None
    return f"invalid value for {field!r}: {first.get('msg')}", field


async def _on_xinference_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, XinferenceError)
    if exc.status_code >= 500 and exc.status_code != 503:  # 503: loading or restarting, expected and transient
        logger.error("%s %s failed: %s", request.method, request.url.path, exc.message)
    return _response(exc, request.url.path)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, field = validation_message(list(exc.errors()))
    return _response(InvalidRequest(message, param=field), request.url.path)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = str(exc.detail) if exc.status_code != 404 else f"no route {request.method} {request.url.path}"
    body = error_body(message, _HTTP_TYPES.get(exc.status_code, "invalid_request_error"), code=exc.status_code)
    return _shaped(request.url.path, exc.status_code, body, getattr(exc, "headers", None))


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    body = error_body("internal server error; see the server log", "internal_error", code="internal_error")
    return _shaped(request.url.path, 500, body)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(XinferenceError, _on_xinference_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
