"""What ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` do (the Anthropic Messages API).

A request is translated into chat-completions parameters (:mod:`xinference.api.protocol.anthropic`) and served by
the same engine calls as ``/v1/chat/completions`` (:class:`GenerationService`); the result or the chunks are
translated back (:mod:`.messages_stream`). Validation, the model lookup and the engine's own refusals happen before
the first byte; once a stream has started, a failure is an ``event: error`` in Anthropic's shape.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

from xinference.api.errors import anthropic_error_event
from xinference.api.protocol.anthropic import CountTokensRequest, MessagesRequest
from xinference.api.route_cache import RouteTable
from xinference.api.serving.generation import GenerationService
from xinference.api.serving.messages_stream import MessageStream, message_from_chat
from xinference.api.sse import encode_events
from xinference.errors import EngineError, XinferenceError

__all__ = ["MessagesService"]

logger = logging.getLogger(__name__)


class MessagesService:
    """The Messages API over the chat serving path."""

    def __init__(self, generation: GenerationService, routes: RouteTable) -> None:
        self._generation = generation
        self._routes = routes

    async def create(self, body: MessagesRequest) -> dict[str, Any] | AsyncIterator[bytes]:
        """A ``message`` dict, or an async iterator of SSE bytes when ``body.stream`` is set."""
        chat = body.to_chat()
        await self._generation.check_images(body.model, chat.image_param)
        if not body.stream:
            result = await self._generation.complete("chat", body.model, chat.params)
            return message_from_chat(result, body.model)
        batches = await self._generation.open("chat", body.model, chat.params)
        return self._events(body.model, batches)

    async def count_tokens(self, body: CountTokensRequest) -> dict[str, Any]:
        """``{"input_tokens": N}``: the prompt as the model's own chat template renders it, tools included."""
        chat = body.to_chat()
        await self._generation.check_images(body.model, chat.image_param)
        route = await self._generation.route(body.model, "chat")
        count, _ = await self._routes.call(route, lambda r: r.ref.count_tokens(chat.params))
        return {"input_tokens": int(count)}

    async def _events(self, model: str, batches: AsyncIterator[list[dict[str, Any]]]) -> AsyncIterator[bytes]:
        stream = MessageStream(model)
        async with contextlib.aclosing(batches):  # type: ignore[type-var]
            try:
                yield encode_events(stream.start())
                async for batch in batches:
                    events = [event for chunk in batch for event in stream.feed(chunk)]
                    if events:
                        yield encode_events(events)
                yield encode_events(stream.finish())
            except XinferenceError as exc:
                yield anthropic_error_event(exc)
            except Exception as exc:  # noqa: BLE001 - never leave a client hanging without a closing event
                logger.exception("a Messages stream of %s failed", model)
                yield anthropic_error_event(EngineError(f"the stream failed: {type(exc).__name__}"))
