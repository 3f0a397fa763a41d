"""What ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` do (the Anthropic Messages API).

A request is translated into chat-completions parameters (:mod:`.translate`) and served by the same engine calls
as ``/v1/chat/completions`` (:class:`GenerationService`); the result or the chunks are translated back
(:mod:`.stream`). Validation, the model lookup and the engine's own refusals happen before the first byte; once a
stream has started, a failure is an ``event: error`` in Anthropic's shape.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from xinference.api.anthropic.protocol import CountTokensRequest, MessagesRequest
from xinference.api.anthropic.stream import MessageStream, message_from_chat
from xinference.api.anthropic.translate import count_tokens_to_chat, messages_to_chat
from xinference.api.errors import anthropic_error_event
from xinference.api.gateway.routes import RouteTable
from xinference.api.openai.chat.serving import GenerationService
from xinference.api.openai.chat.translated import open_chat, relay_events

__all__ = ["MessagesService"]


class MessagesService:
    """The Messages API over the chat serving path."""

    def __init__(self, generation: GenerationService, routes: RouteTable) -> None:
        self._generation = generation
        self._routes = routes

    async def create(self, body: MessagesRequest) -> dict[str, Any] | AsyncIterator[bytes]:
        """A ``message`` dict, or an async iterator of SSE bytes when ``body.stream`` is set."""
        opened = await open_chat(self._generation, body.model, messages_to_chat(body), body.stream, body.keep_alive)
        if isinstance(opened, dict):
            return message_from_chat(opened, body.model)
        return relay_events("Messages", body.model, opened, MessageStream(body.model), anthropic_error_event)

    async def count_tokens(self, body: CountTokensRequest) -> dict[str, Any]:
        """``{"input_tokens": N}``: the prompt as the model's own chat template renders it, tools included."""
        chat = count_tokens_to_chat(body)
        await self._generation.prepare_images(body.model, chat.params["messages"], chat.image_params)
        route = await self._generation.route(body.model, "chat")
        count, _ = await self._routes.call(route, lambda r: r.ref.count_tokens(chat.params))
        return {"input_tokens": int(count)}
