"""Optional API keys: when configured, every route needs ``Authorization: Bearer KEY``.

Only ``GET /v1/cluster/auth`` stays open, because clients probe it to learn whether a key is needed. Written as
pure ASGI middleware so streamed responses are not buffered.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Awaitable, Callable

from xinference.api.errors import error_body

__all__ = ["ApiKeyMiddleware"]

_OPEN_PATHS = frozenset({"/v1/cluster/auth"})

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, keys: frozenset[str]) -> None:
        self.app = app
        self.keys = tuple(k.encode() for k in keys)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.keys or scope.get("path") in _OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            error_body("a valid API key is required: send 'Authorization: Bearer <key>'", "authentication_error",
                       code="invalid_api_key")
        ).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    return any(hmac.compare_digest(token.strip(), key) for key in self.keys)
        return False
