"""A request's own ``keep_alive`` (Ollama's per-request field), shared by every API that serves a model: chat and
text completions, embeddings, rerank, the Anthropic Messages API and OpenAI Responses.

The value replaces the model's keep-alive from then on (see :mod:`xinference.api.gateway.keepalive`), unless the server
sets ``XINFERENCE_KEEP_ALIVE_OVERRIDE=0`` (then it is ignored, but still checked). It is noted once the model is
found and the request is otherwise valid, before it is admitted: a value that is not a duration is a 400 naming
``keep_alive`` (before an unloaded model starts loading), and a request for an unknown model leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from xinference.api.gateway.keepalive import parse_keep_alive
from xinference.api.gateway.routes import Route, RouteTable

__all__ = ["note_keep_alive"]


def note_keep_alive(routes: RouteTable, route: Route, value: Any) -> None:
    """Let ``value`` (a request's ``keep_alive``; None when it has none) hold for ``route``'s model from now on.

    Raises InvalidRequest (``param="keep_alive"``) when it is not a duration like ``"10m"``, seconds or -1.
    """
    if value is None:
        return
    parse_keep_alive(value)  # checked even where the server ignores it
    if routes.keepalive is not None:
        routes.keepalive.note_request(route.model_uid, value)
