"""Optional API keys: when configured, every route needs ``Authorization: Bearer KEY`` (or ``x-api-key: KEY``).

Only ``GET /v1/cluster/auth`` stays open, because clients probe it to learn whether a key is needed, and the web
UI's static files (``/``, ``/ui/...``), which ask the user for a key and send it with every API call. Written as
pure ASGI middleware so streamed responses are not buffered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Awaitable, Callable

from xinference import settings
from xinference.api.errors import anthropic_error_body, error_body, uses_anthropic_shape

__all__ = ["ApiKeyMiddleware"]

_OPEN_PATHS = frozenset({"/v1/cluster/auth", "/", "/ui"})
#: The web UI's static files: the page holds no data and asks for a key itself (its API calls need one).
_OPEN_PREFIX = "/ui/"


def _is_open(path: str) -> bool:
    return path in _OPEN_PATHS or path.startswith(_OPEN_PREFIX)


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, keys: frozenset[str]) -> None:
        self.app = app
        #: SHA-256 of each key: tokens are compared digest to digest, so the time taken depends neither on where a
        #: token differs from a key nor on its length
        self.keys = tuple(hashlib.sha256(k.encode()).digest() for k in keys)
        #: ``XINFERENCE_METRICS_PUBLIC=1``: a Prometheus scraper reads ``/metrics`` without a key
        self.public_metrics = settings.metrics_public()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not self.keys or _is_open(path) or (self.public_metrics and path == "/metrics"):
            await self.app(scope, receive, send)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        message = "a valid API key is required: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"
        if uses_anthropic_shape(scope.get("path", "")):
            payload = anthropic_error_body(message, 401)
        else:
            payload = error_body(message, "authentication_error", code="invalid_api_key")
        body = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: dict[str, Any]) -> bool:
        """A matching ``Authorization: Bearer KEY``, or ``x-api-key: KEY`` (what the Anthropic SDK sends)."""
        for name, value in scope.get("headers", ()):
            token = None
            if name == b"authorization":
                scheme, _, bearer = value.partition(b" ")
                token = bearer.strip() if scheme.lower() == b"bearer" else None
            elif name == b"x-api-key":
                token = value.strip()
            if token:
                digest = hashlib.sha256(token).digest()
                matched = False
                for key in self.keys:  # every key, no early exit
                    matched |= hmac.compare_digest(digest, key)
                if matched:
                    return True
        return False
