"""What ``POST /v1/responses``, ``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}`` do.

A request is translated into chat-completions parameters (:mod:`.translate`), after the conversation of
``previous_response_id`` taken from the :class:`ResponseStore`, and served by the same engine calls as
``/v1/chat/completions`` (:class:`GenerationService`); the result or the chunks are translated back (:mod:`.stream`).
A finished response is stored unless the request said ``store: false``.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from xinference.api.mcp.manager import McpHub
from xinference.api.openai.chat.hosted_mcp import HostedRun, HostedTools, ResumedCall
from xinference.api.openai.chat.serving import GenerationService
from xinference.api.openai.chat.translated import ChatBatches, open_chat, relay_events
from xinference.api.openai.responses.mcp import open_tools
from xinference.api.openai.responses.protocol import ResponsesRequest
from xinference.api.openai.responses.store import ResponseStore
from xinference.api.openai.responses.stream import ResponseShape, ResponseStream, new_id, output_items
from xinference.api.openai.responses.translate import ResponsesTranslation, responses_to_chat
from xinference.api.sse import encode_events
from xinference.errors import InvalidRequest, ResponseNotFound

__all__ = ["ResponsesService", "input_items"]


class ResponsesService:
    """The Responses API over the chat serving path, with its store."""

    def __init__(
        self, generation: GenerationService, store: ResponseStore, mcp_hub: Callable[[], McpHub] | None = None
    ) -> None:
        self._generation = generation
        self._store = store
        #: the app's MCP hub (configured servers; request-named URLs), asked when a request has ``mcp`` tools
        self._mcp_hub = mcp_hub or (lambda: McpHub())

    async def create(self, body: ResponsesRequest) -> dict[str, Any] | AsyncIterator[bytes]:
        """A ``response`` dict, or an async iterator of SSE bytes when ``body.stream`` is set."""
        history = self._history(body.previous_response_id)
        chat = responses_to_chat(body, history)
        shape = ResponseShape(body.model, body.model_dump(exclude_none=True))  # created_at: when it was asked
        if chat.mcp:
            if body.previous_response_id is not None:
                entry = self._store.get(body.previous_response_id)
                chat.mcp.listed |= set(entry.mcp_listed) if entry is not None else set()
            return await self._create_with_mcp(body, chat, shape)
        opened = await open_chat(self._generation, body.model, chat, body.stream, body.keep_alive)
        # this request's messages as sent, image URLs inlined: a later turn does not fetch them again
        sent = chat.params["messages"]
        conversation = history + sent[len(sent) - len(chat.added) :]
        if isinstance(opened, dict):
            choice = (opened.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            response = shape.finished(output_items(message), opened.get("usage"), choice.get("finish_reason"))
            self._keep(body, response, conversation, message)
            return response
        return self._events(body, shape, conversation, opened)

    async def _create_with_mcp(
        self, body: ResponsesRequest, chat: ResponsesTranslation, shape: ResponseShape
    ) -> dict[str, Any] | AsyncIterator[bytes]:
        """A request with ``mcp`` tools: its turns run in a :class:`HostedRun` (always over chat streams), whose
        chunks the same :class:`ResponseStream` turns into items, streamed or gathered into one response."""
        await self._generation.prepare_images(body.model, chat.params["messages"], chat.image_params)
        await self._generation.route(body.model, "chat")  # an unknown model is a 404 before any MCP connection
        client_tools = chat.params.get("tools")
        tools = await open_tools(self._mcp_hub(), chat.mcp, client_tools)
        try:
            conversation = list(chat.params["messages"][len(chat.prefix) :])
            resume = _resume(chat, conversation)
            choice = _first_choice(chat, tools, bool(resume))
            base = {k: v for k, v in chat.params.items() if k not in ("messages", "tools", "tool_choice")}

            async def open_turn(messages: list[dict[str, Any]], offered: Any, turn_choice: Any) -> ChatBatches:
                params = {**base, "messages": messages}
                if offered:
                    params["tools"] = offered
                    if turn_choice is not None:
                        params["tool_choice"] = turn_choice
                return await self._generation.open("chat", body.model, params, body.keep_alive)

            run = HostedRun(open_turn, chat.prefix, conversation, tools, client_tools, choice, resume=resume)
            await run.open()
        except BaseException:
            await tools.aclose()
            raise
        stream = ResponseStream(shape)
        listed = frozenset(chat.mcp.listed | {server.label for server in tools.servers})

        def keep() -> None:
            assert stream.response is not None
            if body.store:
                self._store.put(stream.response, run.messages, input_items(body.input), listed)

        if body.stream:
            events = relay_events(
                "Responses", body.model, run.chunks(), stream, lambda exc: encode_events(stream.fail(exc)), keep
            )
            return _closing(events, tools)
        try:
            async for batch in run.chunks():
                for chunk in batch:
                    stream.feed(chunk)
        finally:
            await tools.aclose()
        stream.finish()
        keep()
        assert stream.response is not None
        return stream.response

    def get(self, response_id: str) -> dict[str, Any]:
        entry = self._store.get(response_id)
        if entry is None:
            raise self._not_found(response_id, "response_id")
        return entry.response

    def input_items(
        self, response_id: str, order: str = "desc", limit: int = 20, after: str | None = None
    ) -> dict[str, Any]:
        """The input items of a stored response, as OpenAI pages them (``order`` asc or desc, ``after`` an id)."""
        entry = self._store.get(response_id)
        if entry is None:
            raise self._not_found(response_id, "response_id")
        items = list(entry.input_items) if order == "asc" else list(reversed(entry.input_items))
        if after is not None:
            ids = [item.get("id") for item in items]
            if after not in ids:
                raise InvalidRequest(f"no input item {after[:80]!r} in response {response_id[:80]!r}", param="after")
            items = items[ids.index(after) + 1 :]
        page = items[:limit]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > len(page),
        }

    def delete(self, response_id: str) -> dict[str, Any]:
        if not self._store.delete(response_id):
            raise self._not_found(response_id, "response_id")
        return {"id": response_id, "object": "response", "deleted": True}

    def _not_found(self, response_id: str, param: str) -> ResponseNotFound:
        return ResponseNotFound(
            f"response {response_id[:80]!r} not found: responses are kept in the API's memory for "
            f"{self._store.ttl:.0f} s (at most {self._store.max_items}), and never with store=false",
            param=param,
        )

    def _history(self, previous: str | None) -> list[dict[str, Any]]:
        if previous is None:
            return []
        entry = self._store.get(previous)
        if entry is None:
            raise self._not_found(previous, "previous_response_id")
        return list(entry.messages)

    def _keep(
        self,
        body: ResponsesRequest,
        response: dict[str, Any],
        conversation: list[dict[str, Any]],
        message: dict[str, Any],
    ) -> None:
        if not body.store:
            return
        reply = {k: v for k, v in message.items() if k in ("role", "content", "reasoning_content", "tool_calls")}
        reply.setdefault("role", "assistant")
        reply["content"] = reply.get("content") or ""
        self._store.put(response, conversation + [reply], input_items(body.input))

    def _events(
        self, body: ResponsesRequest, shape: ResponseShape, conversation: list[dict[str, Any]], batches: ChatBatches
    ) -> AsyncIterator[bytes]:
        stream = ResponseStream(shape)

        def keep() -> None:
            assert stream.response is not None
            self._keep(body, stream.response, conversation, stream.message)

        return relay_events("Responses", body.model, batches, stream, lambda exc: encode_events(stream.fail(exc)), keep)


async def _closing(events: AsyncIterator[bytes], tools: HostedTools) -> AsyncIterator[bytes]:
    """``events``, then the request's MCP sessions closed (also when the client leaves early)."""
    try:
        async for frame in events:
            yield frame
    finally:
        await tools.aclose()


def _pending(conversation: list[dict[str, Any]]) -> list[str]:
    """The ids of calls held for approval in ``conversation`` that no tool result answers yet."""
    answered = {m.get("tool_call_id") for m in conversation if m.get("role") == "tool"}
    return [
        call["id"]
        for message in conversation
        for call in message.get("tool_calls") or ()
        if str(call.get("id", "")).startswith("mcpr_") and call["id"] not in answered
    ]


def _resume(chat: ResponsesTranslation, conversation: list[dict[str, Any]]) -> list[ResumedCall]:
    """The held calls to settle before the first turn: those the input answers, and the others declined."""
    pending = _pending(conversation)
    answers = {r.approval_request_id: r for r in chat.mcp.resume}
    for request_id in answers:
        if request_id not in pending:
            raise InvalidRequest(
                f"no mcp_approval_request {request_id[:80]!r} waits for an answer in this conversation "
                "(give the previous_response_id of the response that asked)",
                param="input",
            )
    return [answers.get(i) or ResumedCall(i, False, "no approval was given") for i in pending]


def _first_choice(chat: ResponsesTranslation, tools: HostedTools, resumed: bool) -> Any:
    """The first turn's ``tool_choice`` in chat form (after an approval the forced call was made already)."""
    choice = chat.mcp.choice
    if resumed and (chat.tool_choice == "required" or choice is not None):
        return "auto"
    if choice is None or choice.get("name") is None:
        return chat.tool_choice
    exposed = tools.exposed_name(choice["server_label"], choice["name"])
    if exposed is None:
        raise InvalidRequest(
            f"tool_choice names tool {choice['name'][:80]!r}, which MCP server {choice['server_label']!r} does not "
            "offer (or allowed_tools leaves out)",
            param="tool_choice.name",
        )
    return {"type": "function", "function": {"name": exposed}}


def input_items(raw: str | list[Any]) -> list[dict[str, Any]]:
    """A request's ``input`` as stored items: a string is one user message; every item gets an id if it has none."""
    if isinstance(raw, str):
        return [
            {
                "id": new_id("msg"),
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": [{"type": "input_text", "text": raw}],
            }
        ]
    items = []
    for item in raw:
        item = dict(item)
        if "type" not in item:
            item["type"] = "message"
        if item["type"] == "message" and isinstance(item.get("content"), str):
            kind = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": kind, "text": item["content"]}]
        item.setdefault(
            "id",
            new_id(
                {"message": "msg", "function_call": "fc", "reasoning": "rs", "mcp_approval_response": "mcpa"}.get(
                    item["type"], "item"
                )
            ),
        )
        items.append(item)
    return items
