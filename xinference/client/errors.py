"""The client's one error, :class:`ClientError`, and how a server's error answer becomes one.

``ClientError`` subclasses ``RuntimeError`` because that is what Xinference's own client raises for every failed
call: code written for it (``except RuntimeError``) keeps working, and gets the status and error fields besides.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["ClientError", "error_from_body", "error_from_response"]


class ClientError(RuntimeError):
    """Raised for every failure of a client call: an error answer, an error frame in a stream, or no answer.

    ``message`` is the server's own message (its error envelope's ``message``, or a ``detail``);
    ``status_code`` is the HTTP status when the server answered (``None`` for connection failures, timeouts and
    errors sent inside a stream); ``error_type``, ``param`` and ``code`` come from the server's error envelope.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        param: str | None = None,
        code: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.error_type = error_type
        self.param = param
        self.code = code

    def __str__(self) -> str:
        return self.message


def error_from_body(body: Any, status_code: int | None, fallback: str) -> ClientError:
    """Read ``{"error": {...}}``, ``{"detail": ...}`` (or any lesser shape) into a ClientError."""
    error: dict[str, Any] = {}
    message: str | None = None
    if isinstance(body, dict):
        raw = body.get("error")
        if isinstance(raw, dict):
            error = raw
            message = raw.get("message")
        elif isinstance(raw, str):
            message = raw
        detail = body.get("detail")
        if not message and detail:
            message = detail if isinstance(detail, str) else json.dumps(detail)
    elif isinstance(body, str) and body.strip():
        message = body.strip()
    return ClientError(
        str(message or fallback),
        status_code=status_code,
        error_type=error.get("type"),
        param=error.get("param"),
        code=error.get("code"),
    )


def error_from_response(response: httpx.Response) -> ClientError:
    """The error of a non-2xx answer whose body was read."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    fallback = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    return error_from_body(body, response.status_code, fallback)
