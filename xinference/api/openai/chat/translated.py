"""What the APIs served by translation to chat completions share: the Anthropic Messages API and OpenAI Responses.

Both turn their request into chat parameters, check and inline their images (refused to a model without the vision
ability), and either await a whole chat result or open a chat stream (:func:`open_chat`); a stream's chat chunks
then pass through a translator (:class:`Translator`: ``MessageStream``, ``ResponseStream``) into named SSE events
(:func:`relay_events`). The two
APIs differ only in their translators, in what they do with a finished answer (Responses stores it) and in how a
failure after the first byte is framed; those are the arguments here.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Protocol, Union

from xinference.api.sse import encode_events
from xinference.errors import EngineError, XinferenceError

if TYPE_CHECKING:
    from xinference.api.openai.chat.serving import GenerationService

__all__ = ["ChatBatches", "ChunkWalker", "Event", "Translator", "open_chat", "relay_events"]

logger = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]
#: an open chat stream: its chunks in batches (see ``GenerationService.open``)
ChatBatches = AsyncIterator[list[dict[str, Any]]]


class Translator(Protocol):
    """Turns one stream's chat chunks into events: ``start()`` once, ``feed(chunk)`` per chunk, ``finish()`` once."""

    def start(self) -> list[Event]: ...

    def feed(self, chunk: dict[str, Any]) -> list[Event]: ...

    def finish(self) -> list[Event]: ...


class ChunkWalker(ABC):
    """Base of the translators: ``feed`` walks a chat chunk's deltas in the order the model produced them
    (reasoning, text, tool calls) and hands each to the subclass's ``_reasoning``, ``_content`` and ``_tool_call``,
    which return the events to send; it keeps the usage (``_take_usage``) and the last ``finish_reason``."""

    _finish: str | None = None

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        if chunk.get("usage"):
            self._take_usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                events += self._reasoning(delta["reasoning_content"])
            if delta.get("content"):
                events += self._content(delta["content"])
            for call in delta.get("tool_calls") or []:
                events += self._tool_call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return events

    @abstractmethod
    def _take_usage(self, usage: dict[str, Any]) -> None:
        """Keep the usage a chunk reports (the last one counts)."""

    @abstractmethod
    def _reasoning(self, text: str) -> list[Event]:
        """The events for a piece of reasoning text."""

    @abstractmethod
    def _content(self, text: str) -> list[Event]:
        """The events for a piece of answer text."""

    @abstractmethod
    def _tool_call(self, call: dict[str, Any]) -> list[Event]:
        """The events for one tool-call delta."""


class _Chat(Protocol):
    """A request translated to chat (``ChatTranslation``, ``ResponsesTranslation``)."""

    params: dict[str, Any]
    image_params: list[str]


async def open_chat(
    generation: GenerationService, model: str, chat: _Chat, stream: bool, keep_alive: Any = None
) -> Union[dict[str, Any], ChatBatches]:
    """The whole chat result, or the opened chat stream when ``stream``; refusals (images to a model without
    vision, a bad image, unknown model, a bad ``keep_alive``, the engine's own 4xx) are raised here, before any byte
    is sent. Image URLs are fetched and inlined first (``GenerationService.prepare_images``).
    ``keep_alive`` is the request's own, as on chat completions."""
    await generation.prepare_images(model, chat.params["messages"], chat.image_params)
    if not stream:
        return await generation.complete("chat", model, chat.params, keep_alive)
    return await generation.open("chat", model, chat.params, keep_alive)


async def relay_events(
    api: str,
    model: str,
    batches: ChatBatches,
    translator: Translator,
    fail: Callable[[XinferenceError], bytes],
    finished: Callable[[], None] | None = None,
) -> AsyncIterator[bytes]:
    """The SSE bytes of a translated stream: the translator's opening events, its events for every batch, then its
    closing ones (``finished`` runs just before those are sent).

    A failure after the first byte is sent as ``fail(exc)`` (the API's own error framing); an unexpected exception
    becomes an :class:`EngineError` first, so a client is never left without a closing event. Closing this iterator
    (the client left) closes ``batches``, which aborts the engine request.
    """
    async with contextlib.aclosing(batches):  # type: ignore[type-var]
        try:
            yield encode_events(translator.start())
            async for batch in batches:
                events = [event for chunk in batch for event in translator.feed(chunk)]
                if events:
                    yield encode_events(events)
            events = translator.finish()
            if finished is not None:
                finished()
            yield encode_events(events)
        except XinferenceError as exc:
            yield fail(exc)
        except Exception as exc:  # noqa: BLE001 - never leave a client hanging without a closing event
            logger.exception("a %s stream of %s failed", api, model)
            yield fail(EngineError(f"the stream failed: {type(exc).__name__}"))
