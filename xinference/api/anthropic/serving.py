"""What ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` do (the Anthropic Messages API).

A request is translated into chat-completions parameters (:mod:`.translate`) and served by the same engine calls
as ``/v1/chat/completions`` (:class:`GenerationService`); the result or the chunks are translated back
(:mod:`.stream`). Validation, the model lookup and the engine's own refusals happen before the first byte; once a
stream has started, a failure is an ``event: error`` in Anthropic's shape.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from xinference.api.anthropic.mcp import MessageBuilder, open_servers
from xinference.api.anthropic.protocol import CountTokensRequest, MessagesRequest
from xinference.api.anthropic.stream import MessageStream, message_from_chat
from xinference.api.anthropic.translate import ChatTranslation, count_tokens_to_chat, messages_to_chat
from xinference.api.errors import anthropic_error_event
from xinference.api.gateway.routes import RouteTable
from xinference.api.mcp.manager import McpHub
from xinference.api.openai.chat.hosted_mcp import HostedRun, HostedTools
from xinference.api.openai.chat.serving import GenerationService
from xinference.api.openai.chat.translated import ChatBatches, open_chat, relay_events
from xinference.errors import InvalidRequest

__all__ = ["MessagesService"]


class MessagesService:
    """The Messages API over the chat serving path."""

    def __init__(
        self, generation: GenerationService, routes: RouteTable, mcp_hub: Callable[[], McpHub] | None = None
    ) -> None:
        self._generation = generation
        self._routes = routes
        #: the app's MCP hub, asked for the URLs of ``mcp_servers`` (checked against XINFERENCE_MCP_ALLOWED_URLS)
        self._mcp_hub = mcp_hub or (lambda: McpHub())

    async def create(self, body: MessagesRequest) -> dict[str, Any] | AsyncIterator[bytes]:
        """A ``message`` dict, or an async iterator of SSE bytes when ``body.stream`` is set."""
        chat = messages_to_chat(body)
        if chat.mcp:
            return await self._create_with_mcp(body, chat)
        opened = await open_chat(self._generation, body.model, chat, body.stream, body.keep_alive)
        if isinstance(opened, dict):
            return message_from_chat(opened, body.model)
        return relay_events("Messages", body.model, opened, MessageStream(body.model), anthropic_error_event)

    async def _create_with_mcp(
        self, body: MessagesRequest, chat: ChatTranslation
    ) -> dict[str, Any] | AsyncIterator[bytes]:
        """A request with ``mcp_servers``: its turns run in a :class:`HostedRun`; the calls become
        ``mcp_tool_use`` / ``mcp_tool_result`` blocks, streamed or gathered into one message."""
        await self._generation.prepare_images(body.model, chat.params["messages"], chat.image_params)
        await self._generation.route(body.model, "chat")  # an unknown model is a 404 before any MCP connection
        client_tools = chat.params.get("tools")
        tools = await open_servers(self._mcp_hub(), chat.mcp, client_tools)
        try:
            choice = _first_choice(chat.tool_choice, tools, client_tools)
            base = {k: v for k, v in chat.params.items() if k not in ("messages", "tools", "tool_choice")}

            async def open_turn(messages: list[dict[str, Any]], offered: Any, turn_choice: Any) -> ChatBatches:
                params = {**base, "messages": messages}
                if offered:
                    params["tools"] = offered
                    if turn_choice is not None:
                        params["tool_choice"] = turn_choice
                return await self._generation.open("chat", body.model, params, body.keep_alive)

            run = HostedRun(open_turn, [], list(chat.params["messages"]), tools, client_tools, choice)
            await run.open()
        except BaseException:
            await tools.aclose()
            raise
        stream = MessageStream(body.model)
        if body.stream:
            events = relay_events("Messages", body.model, run.chunks(), stream, anthropic_error_event)
            return _closing(events, tools)
        builder = MessageBuilder()
        builder.apply(stream.start())
        try:
            async for batch in run.chunks():
                for chunk in batch:
                    builder.apply(stream.feed(chunk))
        finally:
            await tools.aclose()
        builder.apply(stream.finish())
        return builder.message

    async def count_tokens(self, body: CountTokensRequest) -> dict[str, Any]:
        """``{"input_tokens": N}``: the prompt as the model's own chat template renders it, tools included."""
        chat = count_tokens_to_chat(body)
        await self._generation.prepare_images(body.model, chat.params["messages"], chat.image_params)
        route = await self._generation.route(body.model, "chat")
        count, _ = await self._routes.call(route, lambda r: r.ref.count_tokens(chat.params))
        return {"input_tokens": int(count)}


async def _closing(events: AsyncIterator[bytes], tools: HostedTools) -> AsyncIterator[bytes]:
    """``events``, then the request's MCP sessions closed (also when the client leaves early)."""
    try:
        async for frame in events:
            yield frame
    finally:
        await tools.aclose()


def _first_choice(choice: Any, tools: HostedTools, client_tools: list[dict[str, Any]] | None) -> Any:
    """The first turn's ``tool_choice``: a ``tool`` choice naming an MCP tool (by its own name) becomes the name
    the model sees for it."""
    if not isinstance(choice, dict):
        return choice
    name = choice["function"]["name"]
    if any((t.get("function") or {}).get("name") == name for t in client_tools or []):
        return choice
    exposed = next((t.exposed for t in tools.tools.values() if t.info.name == name or t.exposed == name), None)
    if exposed is None:
        raise InvalidRequest(
            f"tool_choice names tool {name[:80]!r}, which is neither in 'tools' nor offered by the MCP servers",
            param="tool_choice.name",
        )
    return {"type": "function", "function": {"name": exposed}}
