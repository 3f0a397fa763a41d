"""Chat-completion results and chunks turned into OpenAI Responses: a whole ``response`` object, or the events of
a stream.

Output items come in the order the model produced them: a ``reasoning`` item (from ``reasoning_content``), a
``message`` item (from ``content``), then one ``function_call`` item per tool call. A stream emits
``response.created`` and ``response.in_progress``; for each item ``response.output_item.added``, its parts and
deltas (``response.reasoning_text.delta``, ``response.output_text.delta``,
``response.function_call_arguments.delta``), their ``.done`` events and ``response.output_item.done``; and ends with
``response.completed`` (or ``response.incomplete`` when ``max_output_tokens`` cut it, ``response.failed`` after an
``error`` event). Every event carries a ``sequence_number``. Pure code, tested without a server.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from xinference.api.openai.chat.translated import ChunkWalker, Event
from xinference.api.openai.responses.mcp import McpItems
from xinference.errors import EngineError, XinferenceError

__all__ = ["ResponseShape", "ResponseStream", "new_id", "output_items", "usage"]

#: the chunks of an MCP run (``api/openai/chat/hosted_mcp.py``) that become MCP output items
_MCP_KEYS = ("mcp_list_tools", "mcp_call", "mcp_approval_request")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage(chat_usage: dict[str, Any] | None) -> dict[str, Any]:
    """The Responses ``usage`` object of a chat ``usage``."""
    chat_usage = chat_usage or {}
    prompt, completion = int(chat_usage.get("prompt_tokens") or 0), int(chat_usage.get("completion_tokens") or 0)
    cached = int((chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [_text_part(text)]
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_items(message: dict[str, Any], status: str = "completed") -> list[dict[str, Any]]:
    """The output items of one chat ``message`` (reasoning, text, tool calls)."""
    items = []
    if message.get("reasoning_content"):
        items.append(_reasoning_item(new_id("rs"), message["reasoning_content"], status))
    if message.get("content"):
        items.append(_message_item(new_id("msg"), message["content"], status))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            _call_item(
                new_id("fc"),
                call.get("id") or new_id("call"),
                function.get("name", ""),
                function.get("arguments") or "",
                status,
            )
        )
    return items


@dataclass
class ResponseShape:
    """The fields a ``response`` object echoes from its request, and its identity."""

    model: str
    request: dict[str, Any]
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def build(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage_: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = self.request
        incomplete = status == "incomplete"
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "metadata": request.get("metadata") or {},
            "model": self.model,
            "output": output,
            "parallel_tool_calls": request.get("parallel_tool_calls") is not False,
            "previous_response_id": request.get("previous_response_id"),
            "reasoning": request.get("reasoning") or {"effort": None, "summary": None},
            "store": request.get("store", True),
            "temperature": request.get("temperature"),
            "text": request.get("text") or {"format": {"type": "text"}},
            "tool_choice": request.get("tool_choice") or "auto",
            "tools": request.get("tools") or [],
            "top_p": request.get("top_p"),
            "truncation": request.get("truncation") or "disabled",
            "usage": usage_,
            "user": request.get("user"),
        }

    def finished(
        self, output: list[dict[str, Any]], chat_usage: dict[str, Any] | None, finish_reason: str | None
    ) -> dict[str, Any]:
        status = "incomplete" if finish_reason == "length" else "completed"
        return self.build(status, output, usage(chat_usage))


class ResponseStream(ChunkWalker):
    """Turns chat chunks into Responses stream events; one instance per stream.

    ``start()`` once, ``feed(chunk)`` for every chunk, then ``finish()`` (or ``fail(exc)``); each returns the events
    to send as ``(event name, payload)`` pairs. ``response`` holds the final object once finished.
    """

    def __init__(self, shape: ResponseShape) -> None:
        self.shape = shape
        self.output: list[dict[str, Any]] = []
        self.message: dict[str, Any] = {"role": "assistant", "content": ""}  # the chat message, for the store
        self.response: dict[str, Any] | None = None
        self._seq = 0
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] | None = None
        self._finish = None
        self._mcp = McpItems(self._announce, self._event)

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        if not chunk.get("choices") and any(k in chunk for k in _MCP_KEYS):
            return self._mcp.feed(chunk, self.output, new_id)
        return super().feed(chunk)

    def _announce(self, item: dict[str, Any]) -> list[Event]:
        """Close the item being streamed and announce ``item``, which the caller appends to the output itself."""
        events = self._close()
        events.append(self._event("response.output_item.added", output_index=len(self.output), item=item))
        return events

    def _event(self, kind: str, /, **payload: Any) -> Event:
        event = (kind, {"type": kind, "sequence_number": self._seq, **payload})
        self._seq += 1
        return event

    def start(self) -> list[Event]:
        opening = self.shape.build("in_progress", [])
        return [
            self._event("response.created", response=opening),
            self._event("response.in_progress", response=opening),
        ]

    def _take_usage(self, usage: dict[str, Any]) -> None:
        self._usage = usage

    def _reasoning(self, text: str) -> list[Event]:
        return self._text("reasoning", text)

    def _content(self, text: str) -> list[Event]:
        return self._text("message", text)

    def finish(self) -> list[Event]:
        events = self._close()
        self.response = self.shape.finished(self.output, self._usage, self._finish)
        name = "response.incomplete" if self.response["status"] == "incomplete" else "response.completed"
        return events + [self._event(name, response=self.response)]

    def fail(self, exc: XinferenceError) -> list[Event]:
        error = {"code": exc.code or exc.error_type, "message": exc.message}
        failed = self.shape.build("failed", self.output, error=error)
        return [
            self._event("error", code=error["code"], message=exc.message, param=exc.param),
            self._event("response.failed", response=failed),
        ]

    # -- items --------------------------------------------------------------------------------------------------
    def _add(self, item: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._open = item
        output_index = len(self.output)
        item["_index"] = output_index
        events.append(self._event("response.output_item.added", output_index=output_index, item=_public(item)))
        return events

    def _text(self, kind: str, text: str) -> list[Event]:
        events: list[Event] = []
        if self._open is None or self._open["type"] != kind:
            item = (
                _reasoning_item(new_id("rs"), "", "in_progress")
                if kind == "reasoning"
                else _message_item(new_id("msg"), None, "in_progress")
            )
            events += self._add(item)
            part = {"type": "reasoning_text", "text": ""} if kind == "reasoning" else _text_part("")
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=item["_index"],
                    content_index=0,
                    part=part,
                )
            )
            item["_text"] = ""
        current = self._open
        assert current is not None
        current["_text"] += text
        if kind == "reasoning":
            self.message["reasoning_content"] = self.message.get("reasoning_content", "") + text
            events.append(
                self._event(
                    "response.reasoning_text.delta",
                    item_id=current["id"],
                    output_index=current["_index"],
                    content_index=0,
                    delta=text,
                )
            )
        else:
            self.message["content"] += text
            events.append(
                self._event(
                    "response.output_text.delta",
                    item_id=current["id"],
                    output_index=current["_index"],
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            )
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[Event]:
        index = int(call.get("index") or 0)
        function = call.get("function") or {}
        events: list[Event] = []
        item = self._calls.get(index)
        if item is None:
            item = _call_item(
                new_id("fc"), call.get("id") or new_id("call"), function.get("name") or "", "", "in_progress"
            )
            events += self._add(item)
            self._calls[index] = item
            self.message.setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": ""}}
            )
            item["_chat"] = self.message["tool_calls"][-1]
        elif item is not self._open:
            raise EngineError("the engine interleaved the arguments of two tool calls")
        arguments = function.get("arguments")
        if arguments:
            item["arguments"] += arguments
            item["_chat"]["function"]["arguments"] += arguments
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=item["_index"],
                    delta=arguments,
                )
            )
        return events

    def _close(self) -> list[Event]:
        item, self._open = self._open, None
        if item is None:
            return []
        events: list[Event] = []
        where = {"item_id": item["id"], "output_index": item["_index"]}
        if item["type"] == "function_call":
            events.append(
                self._event(
                    "response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"]
                )
            )
            done = _call_item(item["id"], item["call_id"], item["name"], item["arguments"], "completed")
        elif item["type"] == "reasoning":
            part = {"type": "reasoning_text", "text": item["_text"]}
            events.append(self._event("response.reasoning_text.done", **where, content_index=0, text=item["_text"]))
            events.append(self._event("response.content_part.done", **where, content_index=0, part=part))
            done = _reasoning_item(item["id"], item["_text"], "completed")
        else:
            events.append(
                self._event("response.output_text.done", **where, content_index=0, text=item["_text"], logprobs=[])
            )
            events.append(
                self._event("response.content_part.done", **where, content_index=0, part=_text_part(item["_text"]))
            )
            done = _message_item(item["id"], item["_text"], "completed")
        self.output.append(done)
        events.append(self._event("response.output_item.done", output_index=item["_index"], item=done))
        return events


def _public(item: dict[str, Any]) -> dict[str, Any]:
    """An item without this module's bookkeeping keys."""
    return {k: v for k, v in item.items() if not k.startswith("_")}
