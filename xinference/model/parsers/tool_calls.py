"""The machinery shared by the JSON tool-call formats: a format describes its markers, this module does the parsing.

:class:`ToolCallFormat` is also the type every format has (engines and grammars take it); the formats whose calls
are not one JSON object each subclass it in :mod:`.blocks`.

The JSON formats write calls as objects ``{"name": ..., "arguments"|"parameters": {...}}`` inside some markers
(Hermes/Qwen ``<tool_call>...</tool_call>``, Mistral ``[TOOL_CALLS][...]``, Phi-4-mini ``<|tool_call|>[...]``,
InternLM ``<|action_start|><|plugin|>...``, Llama 3 a bare object at the start of the message).
:class:`ToolCallStream` follows generated text as it grows:

- text before (and after) the calls stays content; a suffix that may be the start of a marker is held back until
  the next delta decides;
- a call is announced (id, index, name) as soon as its name is complete, then its arguments go out as they arrive,
  so concatenated deltas equal the whole-text result;
- an object that turns out not to be a call (no name, broken JSON) is given back as content, marker included.

The whole-text parse is the stream fed once, so both paths give the same answer by construction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from xinference.model.parsers.base import ParsedCall, StepStream, ToolCallDelta, new_call_id, scan_object

__all__ = ["CallStream", "ToolCallFormat", "ToolCallStream", "ToolEvent", "Tools", "parse_tool_calls"]

#: What a stream step yields: content text, or a piece of a tool call.
ToolEvent = Union[str, ToolCallDelta]

#: The request's ``tools`` (OpenAI's shape), when the parser is told them: formats that write raw text values
#: (Qwen3-Coder's XML, GLM's ``<arg_value>``) read the declared parameter types from them.
Tools = list[dict[str, Any]]


class CallStream(Protocol):
    """What every format's stream does: ``feed(delta)`` then ``finish()``, each returning events in order;
    ``calls`` counts the calls announced so far."""

    calls: int

    def feed(self, delta: str) -> list[ToolEvent]: ...

    def finish(self) -> list[ToolEvent]: ...


@dataclass(frozen=True)
class ToolCallFormat:
    """How one model family writes tool calls.

    ``openers`` switch from content to calls; ``opens_on_json`` also lets a message that *starts* with ``{`` be a
    call (Llama 3 writes bare JSON); ``separators`` are skipped between the call objects (closing markers, commas,
    array brackets); ``argument_keys`` name the object's arguments, first match wins.
    """

    name: str
    openers: tuple[str, ...] = ()
    opens_on_json: bool = False
    separators: tuple[str, ...] = ()
    argument_keys: tuple[str, ...] = ("arguments", "parameters")
    #: the model's own rendering of a call, for the grammar of a forced call: ``prefix + json + suffix``
    call_prefix: str = ""
    call_suffix: str = ""

    def stream(self, tools: Tools | None = None) -> CallStream:
        """A parser for one message; ``tools`` are the request's (the JSON formats do not need them)."""
        return ToolCallStream(self)

    def parse(self, text: str, tools: Tools | None = None) -> tuple[str, list[ParsedCall]]:
        """Split a whole message into its content and its tool calls."""
        return parse_tool_calls(self, text, tools)


@dataclass
class _OpenCall:
    """The call object being read: where its arguments went so far."""

    opener: str
    id: str = field(default_factory=new_call_id)
    announced: bool = False
    sent_arguments: int = 0  # characters of the arguments value already sent


class ToolCallStream(StepStream[ToolEvent]):
    """Incremental parser of one message. ``feed(delta)`` then ``finish()``; both return events in order."""

    def __init__(self, fmt: ToolCallFormat) -> None:
        self.fmt = fmt
        self._buf = ""
        self._in_calls = False
        self._seen_text = False  # some non-whitespace content went out (a bare-JSON call can no longer start)
        self._call: _OpenCall | None = None
        self._opener = ""  # the marker that opened the call region (given back if no call follows)
        self._region_calls = 0  # calls since the region opened (its opener is given back while there are none)
        self.calls = 0

    def finish(self) -> list[ToolEvent]:
        events = self._drain(final=True)
        if self._in_calls and self._call is None:
            self._leave_calls(events)  # an opener the message ended after: content, like any marker with no call
        return events

    # -- content ---------------------------------------------------------------------------------------------------
    def _step(self, events: list[ToolEvent], final: bool) -> bool:
        return self._calls_step(events, final) if self._in_calls else self._content_step(events, final)

    def _content_step(self, events: list[ToolEvent], final: bool) -> bool:
        buf = self._buf
        if self.fmt.opens_on_json and not self._seen_text:
            stripped = buf.lstrip()
            if not stripped:
                return False if not final else self._emit_content(events, buf, len(buf))
            if stripped[0] == "{":
                self._buf, self._in_calls, self._opener = stripped, True, buf[: len(buf) - len(stripped)]
                self._region_calls = 0
                return True
        found = [(buf.find(m), m) for m in self.fmt.openers]
        hits = [(i, m) for i, m in found if i >= 0]
        if hits:
            index, marker = min(hits)
            self._emit_content(events, buf, index)
            self._buf = self._buf[len(marker) :]
            self._in_calls, self._opener, self._region_calls = True, marker, 0
            return True
        keep = 0 if final else _held_suffix(buf, self.fmt.openers)
        self._emit_content(events, buf, len(buf) - keep)
        return False  # nothing more to do until more text comes

    def _emit_content(self, events: list[ToolEvent], buf: str, upto: int) -> bool:
        if upto > 0:
            text = buf[:upto]
            events.append(text)
            if text.strip():
                self._seen_text = True
            self._buf = buf[upto:]
        return upto > 0

    # -- calls -----------------------------------------------------------------------------------------------------
    def _calls_step(self, events: list[ToolEvent], final: bool) -> bool:
        if self._call is None:
            skipped = self._skip_separators(final)
            if skipped is None:
                return False  # a separator may be forming: wait for more text
            if not self._buf:
                return skipped
            if self._buf[0] != "{":
                self._leave_calls(events)
                return True
            self._call = _OpenCall(self._opener)
        return self._read_call(events, final)

    def _skip_separators(self, final: bool) -> bool | None:
        """Drop whitespace and separators at the head of the buffer; None when the head may be a partial one."""
        start = self._buf
        markers = self.fmt.separators + self.fmt.openers
        while True:
            stripped = self._buf.lstrip()
            self._buf = stripped
            hit = next((m for m in markers if stripped.startswith(m)), None)
            if hit is None:
                break
            self._buf = stripped[len(hit) :]
        self._opener += start[: len(start) - len(self._buf)]  # given back with the marker if no call follows
        if not final and self._buf and any(m.startswith(self._buf) and m != self._buf for m in markers):
            return None
        return self._buf != start

    def _leave_calls(self, events: list[ToolEvent]) -> None:
        """What follows is not a call: back to content (the marker too, when no call came after it)."""
        if self._region_calls == 0 and self._opener.strip():
            events.append(self._opener)
            self._seen_text = True
        self._in_calls, self._opener = False, ""

    def _read_call(self, events: list[ToolEvent], final: bool) -> bool:
        call = self._call
        assert call is not None
        scan = scan_object(self._buf, 0)
        name_span = scan.keys.get("name")
        arg_key = next((k for k in self.fmt.argument_keys if k in scan.keys), None)
        if scan.broken or (scan.end is None and final):
            return self._abandon(events, call)
        if not call.announced and name_span is not None and name_span[1] is not None:
            name = _json_string(self._buf[name_span[0] : name_span[1]])
            if name is None:
                return self._abandon(events, call)
            events.append(ToolCallDelta(index=self.calls, id=call.id, name=name))
            call.announced = True
        if call.announced and arg_key is not None:
            start, end = scan.keys[arg_key]
            if self._buf[start] == "{":  # an object streams as it comes; other shapes go out once complete
                upto = end if end is not None else len(self._buf)
                if upto - start > call.sent_arguments:
                    piece = self._buf[start + call.sent_arguments : upto]
                    events.append(ToolCallDelta(index=self.calls, arguments=piece))
                    call.sent_arguments = upto - start
        if scan.end is None:
            return False
        return self._close_call(events, call, scan.end, arg_key)

    def _close_call(self, events: list[ToolEvent], call: _OpenCall, end: int, arg_key: str | None) -> bool:
        text = self._buf[:end]
        try:
            obj = json.loads(text)
        except ValueError:
            return self._abandon(events, call)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return self._abandon(events, call)
        if not call.announced:
            events.append(ToolCallDelta(index=self.calls, id=call.id, name=obj["name"]))
        arguments = _arguments_text(obj.get(arg_key) if arg_key else None)
        if call.sent_arguments == 0:
            events.append(ToolCallDelta(index=self.calls, arguments=arguments))
        self._buf = self._buf[end:]
        self._call, self._opener = None, ""
        self.calls += 1
        self._region_calls += 1
        return True

    def _abandon(self, events: list[ToolEvent], call: _OpenCall) -> bool:
        """The object is not a call. Before its announcement it goes back to content; after, the call ends as is."""
        self._call = None
        if call.announced:
            self.calls += 1
            self._buf = ""
            return False
        events.append(call.opener + self._buf)
        self._seen_text = True
        self._buf = ""
        self._in_calls, self._opener = False, ""
        return False


def _json_string(text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _arguments_text(value: object) -> str:
    """OpenAI's ``arguments`` string for a parsed value (a JSON text in a string is taken as that JSON)."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return json.dumps(value, ensure_ascii=False)
        return value
    return json.dumps(value, ensure_ascii=False)


def _held_suffix(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


def parse_tool_calls(fmt: ToolCallFormat, text: str, tools: Tools | None = None) -> tuple[str, list[ParsedCall]]:
    """Content and complete calls of a whole message (the stream fed once)."""
    stream = fmt.stream(tools)
    events = stream.feed(text) + stream.finish()
    content: list[str] = []
    calls: list[ParsedCall] = []
    for event in events:
        if isinstance(event, str):
            content.append(event)
        elif event.name is not None:
            calls.append(ParsedCall(name=event.name, arguments="", id=event.id or new_call_id()))
        else:
            calls[event.index].arguments += event.arguments
    for call in calls:
        if not call.arguments:
            call.arguments = "{}"
    return "".join(content), calls
