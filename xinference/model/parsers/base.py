"""What every parser returns, and the small JSON scanner the tool-call formats share.

Parsers are pure: they see generated text (whole, or as a stream of deltas) and say which part is content, which is
reasoning and which are tool calls. They never call an engine and never raise on odd model output: text that does
not parse as a call stays content.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = [
    "ObjectScan",
    "ParsedCall",
    "StepStream",
    "ToolCallDelta",
    "new_call_id",
    "scan_object",
    "scan_value",
]


E = TypeVar("E")


class StepStream(ABC, Generic[E]):
    """The loop every incremental parser shares: ``feed(delta)`` buffers the text in ``_buf`` and runs ``_step``
    until the buffer is empty or a step cannot decide yet (it returns False: more text is needed, or ``final`` has
    settled everything it can). A subclass sets ``_buf`` to ``""`` in ``__init__``, writes ``_step`` and its own
    ``finish`` (which drains with ``final`` and then says what the leftovers are)."""

    _buf: str

    def feed(self, delta: str) -> list[E]:
        self._buf += delta
        return self._drain(final=False)

    def _drain(self, final: bool) -> list[E]:
        events: list[E] = []
        while self._buf and self._step(events, final):
            pass
        return events

    @abstractmethod
    def _step(self, events: list[E], final: bool) -> bool:
        """Consume a piece of ``_buf`` (appending what it means to ``events``); False when nothing could be."""


def new_call_id() -> str:
    """An OpenAI-style tool call id (``call_`` + 24 hex digits)."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class ParsedCall:
    """One complete tool call: ``arguments`` is a JSON text (OpenAI's shape), ``id`` stable across the stream."""

    name: str
    arguments: str
    id: str = field(default_factory=new_call_id)

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ToolCallDelta:
    """A piece of a streamed tool call: the first one of a call carries ``id`` and ``name``, later ones only
    ``arguments`` text. ``index`` numbers the calls of one message from 0."""

    index: int
    arguments: str = ""
    id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        function: dict[str, Any] = {"arguments": self.arguments}
        if self.name is not None:
            function["name"] = self.name
        out["function"] = function
        return out


_WS = " \t\r\n"


def scan_value(text: str, start: int) -> int | None:
    """End index (exclusive) of the JSON value beginning at ``text[start]``; None while it is incomplete.

    Only the structure is followed (brackets, strings and escapes); a scalar ends at the first character that cannot
    continue it. ``text[start]`` must not be whitespace.
    """
    if start >= len(text):
        return None
    first = text[start]
    if first == '"':
        i = start + 1
        while i < len(text):
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == '"':
                return i + 1
            i += 1
        return None
    if first in "{[":
        depth, i, in_string = 0, start, False
        while i < len(text):
            ch = text[i]
            if in_string:
                if ch == "\\":
                    i += 2
                    continue
                if ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return None
    i = start
    while i < len(text) and text[i] not in _WS + ",}]":
        i += 1
    return i if i < len(text) else None


@dataclass
class ObjectScan:
    """What :func:`scan_object` found in a (possibly partial) JSON object: each top-level key with the span of its
    value (``end`` None while that value is incomplete), and ``end`` of the whole object (None while open)."""

    keys: dict[str, tuple[int, int | None]]
    end: int | None
    broken: bool = False


def scan_object(text: str, start: int) -> ObjectScan:
    """Scan the JSON object opening at ``text[start] == "{"`` as far as ``text`` goes.

    ``broken`` is set when the text cannot be a JSON object (a key that is not a string, a missing ``:``...).
    """
    keys: dict[str, tuple[int, int | None]] = {}
    i = start + 1
    n = len(text)
    while True:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return ObjectScan(keys, None)
        if text[i] == "}":
            return ObjectScan(keys, i + 1)
        if text[i] == ",":
            i += 1
            continue
        if text[i] != '"':
            return ObjectScan(keys, None, broken=True)
        key_end = scan_value(text, i)
        if key_end is None:
            return ObjectScan(keys, None)
        try:
            key = json.loads(text[i:key_end])
        except ValueError:
            return ObjectScan(keys, None, broken=True)
        i = key_end
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return ObjectScan(keys, None)
        if text[i] != ":":
            return ObjectScan(keys, None, broken=True)
        i += 1
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return ObjectScan(keys, None)
        value_end = scan_value(text, i)
        keys[str(key)] = (i, value_end)
        if value_end is None:
            return ObjectScan(keys, None)
        i = value_end
