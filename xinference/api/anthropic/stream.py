"""Chat-completion results and chunks turned into Anthropic Messages: a whole ``message``, or the event sequence of
a stream.

The stream follows the order the Anthropic SDK accumulates: ``message_start``, ``ping``, then for each content block
``content_block_start``, its deltas (``text_delta``, ``thinking_delta``, ``input_json_delta``) and
``content_block_stop``; then ``message_delta`` (``stop_reason``, usage) and ``message_stop``. Blocks never
interleave: a block is closed before the next one opens, as the SDK indexes deltas by block. Pure functions and
one small state machine, so the sequencing is tested without a server.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from xinference.api.anthropic.mcp import McpBlocks
from xinference.api.openai.chat.translated import ChunkWalker, Event
from xinference.errors import EngineError

__all__ = ["MessageStream", "message_from_chat", "new_message_id", "stop_reason"]

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def stop_reason(finish_reason: str | None) -> str:
    """Anthropic's ``stop_reason`` for a chat ``finish_reason``.

    A stop sequence and the model's own end of turn both arrive as ``stop`` (the engines do not say which one
    ended the text), so both are ``end_turn``.
    """
    return _STOP_REASONS.get(finish_reason or "stop", "end_turn")


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }


def _tool_input(arguments: str | None, name: str, truncated: bool) -> dict[str, Any]:
    """The parsed arguments of a call. A call cut by ``max_tokens`` keeps an empty input (the ``stop_reason``
    says it was cut); any other unparseable call is the engine breaking its contract."""
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    if truncated:
        return {}
    raise EngineError(f"the model called tool {name!r} with arguments that are not a JSON object")


def message_from_chat(result: dict[str, Any], model: str) -> dict[str, Any]:
    """A whole ``chat.completion`` as an Anthropic ``message``: thinking, then text, then tool_use blocks."""
    choice = (result.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    truncated = choice.get("finish_reason") == "length"
    if message.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": message["reasoning_content"], "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        name = function.get("name", "")
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": name,
                "input": _tool_input(function.get("arguments"), name, truncated),
            }
        )
    reason = stop_reason(choice.get("finish_reason"))
    if reason == "end_turn" and any(b["type"] == "tool_use" for b in content):
        reason = "tool_use"
    return {
        "id": new_message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": _usage(result.get("usage")),
    }


class MessageStream(ChunkWalker):
    """Turns chat chunks into Messages stream events; one instance per stream.

    ``start()`` once, ``feed(chunk)`` for every chunk, ``finish()`` once at the end; each returns the events to
    send, as ``(event name, payload)`` pairs.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = new_message_id()
        self._block = -1  # index of the open block, -1 when none is open
        self._open_kind: str | None = None
        self._calls: dict[int, int] = {}  # chat tool-call index → block index
        self._finish = None
        self._usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
        self._mcp = McpBlocks(self)

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        if not chunk.get("choices") and ("mcp_call" in chunk or "mcp_list_tools" in chunk):
            return self._mcp.feed(chunk)
        return super().feed(chunk)

    def start(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(self._usage),
        }
        return [("message_start", {"type": "message_start", "message": message}), ("ping", {"type": "ping"})]

    def _take_usage(self, usage: dict[str, Any]) -> None:
        self._usage = _usage(usage)

    def _reasoning(self, text: str) -> list[Event]:
        return self._text_like("thinking", text)

    def _content(self, text: str) -> list[Event]:
        return self._text_like("text", text)

    def finish(self) -> list[Event]:
        events = self._close()
        reason = stop_reason(self._finish)
        if reason == "end_turn" and self._calls:
            reason = "tool_use"
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": None},
                    "usage": dict(self._usage),
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    # -- blocks -------------------------------------------------------------------------------------------------
    def _open(self, block: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._block += 1
        self._open_kind = block["type"]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": self._block, "content_block": block})
        )
        return events

    def _close(self) -> list[Event]:
        if self._open_kind is None:
            return []
        self._open_kind = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self._block})]

    def _delta(self, delta: dict[str, Any]) -> Event:
        return ("content_block_delta", {"type": "content_block_delta", "index": self._block, "delta": delta})

    def _text_like(self, kind: str, text: str) -> list[Event]:
        events: list[Event] = []
        if self._open_kind != kind:
            block = (
                {"type": "text", "text": ""}
                if kind == "text"
                else {"type": "thinking", "thinking": "", "signature": ""}
            )
            events += self._open(block)
        if kind == "text":
            events.append(self._delta({"type": "text_delta", "text": text}))
        else:
            events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[Event]:
        index = int(call.get("index") or 0)
        function = call.get("function") or {}
        events: list[Event] = []
        if index not in self._calls:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": function.get("name") or "",
                "input": {},
            }
            events += self._open(block)
            self._calls[index] = self._block
        elif self._calls[index] != self._block or self._open_kind != "tool_use":
            raise EngineError(
                "the engine interleaved the arguments of two tool calls; a Messages stream cannot "
                "reopen a finished block"
            )
        arguments = function.get("arguments")
        if arguments:
            events.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return events
