"""gpt-oss's harmony format: the reply is a sequence of messages on channels, not text with tags::

    <|channel|>analysis<|message|>The user asks for the weather...<|end|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

    <|channel|>analysis<|message|>Need the tool.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"SF"}<|call|>

(the recipient may also come first: ``<|start|>assistant to=functions.get_weather<|channel|>commentary json
<|message|>...``). :class:`HarmonyStream` splits it like a reasoning parser: ``analysis`` is reasoning, ``final``
and ``commentary`` without a recipient (preambles the user may see) are content, and a message to a recipient is
passed on as content in one canonical shape, ``<|channel|>commentary to=RECIPIENT<|message|>BODY<|call|>``, which
the ``harmony`` tool-call format (:data:`HARMONY_CALLS`) turns into a call. Text with no harmony header at all is
content. The special tokens must be in the decoded text (engines keep them when a family declares this format).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from xinference.model.parsers.base import StepStream
from xinference.model.parsers.blocks import Bad, BlockCallFormat, Call, Done, Found, Skip, Step
from xinference.model.parsers.reasoning import ReasoningEvent, ReasoningTags, add_event
from xinference.model.parsers.tool_calls import Tools

__all__ = ["HARMONY", "HARMONY_CALLS", "HarmonyStream", "HarmonyTags"]

MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
START = "<|start|>"
CONSTRAIN = "<|constrain|>"
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_HEADER_STARTS = (CHANNEL, START, CONSTRAIN, "to=", " to=")
_RECIPIENT = re.compile(r"(?:^|\s|\|>)to=([^\s<]+)")
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*([^\s<]+)")


def _held(text: str, markers: tuple[str, ...]) -> int:
    best = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:size]):
                best = size
                break
    return best


class HarmonyStream(StepStream[ReasoningEvent]):
    """Incremental splitter of one harmony reply; the same ``feed``/``finish`` contract as ReasoningStream."""

    def __init__(self) -> None:
        self._buf = ""
        self._phase: Literal["between", "header", "body"] = "between"
        self._kind: Literal["reasoning", "content", "call"] = "content"
        self._recipient = ""
        self._call_body = ""

    def finish(self) -> list[ReasoningEvent]:
        events = self._drain(final=True)
        if self._phase == "body" and self._kind == "call":
            add_event(events, "content", self._canonical())  # cut off before <|call|>: the tool parser decides
        elif self._buf:
            reasoning = self._phase == "body" and self._kind == "reasoning"
            add_event(events, "reasoning" if reasoning else "content", self._buf)
        self._buf = ""
        return events

    def _canonical(self) -> str:
        return f"{CHANNEL}commentary to={self._recipient}{MESSAGE}{self._call_body}<|call|>"

    def _step(self, events: list[ReasoningEvent], final: bool) -> bool:
        if self._phase == "between":
            return self._between(final)
        if self._phase == "header":
            return self._header(events, final)
        return self._body(events, final)

    def _between(self, final: bool) -> bool:
        head = self._buf.lstrip()
        if any(head.startswith(s) for s in _HEADER_STARTS):
            self._buf, self._phase = head, "header"
            return True
        if not final and (not head or any(s.startswith(head) for s in _HEADER_STARTS)):
            return False
        self._phase, self._kind = "body", "content"  # no header: plain text is the answer
        return True

    def _header(self, events: list[ReasoningEvent], final: bool) -> bool:
        index = self._buf.find(MESSAGE)
        if index < 0:
            if final:
                add_event(events, "content", self._buf)
                self._buf = ""
            return False
        header, self._buf = self._buf[:index], self._buf[index + len(MESSAGE) :]
        recipient = _RECIPIENT.search(header)
        channel = _CHANNEL_NAME.search(header)
        name = channel.group(1) if channel else "final"
        if recipient is not None and not recipient.group(1).startswith("assistant"):
            self._kind, self._recipient, self._call_body = "call", recipient.group(1), ""
        else:
            self._kind = "reasoning" if name == "analysis" else "content"
        self._phase = "body"
        return True

    def _body(self, events: list[ReasoningEvent], final: bool) -> bool:
        markers = (*_ENDS, START)
        hits = [(i, m) for i, m in ((self._buf.find(m), m) for m in markers) if i >= 0]
        if hits:
            index, marker = min(hits)
            self._take(events, self._buf[:index])
            self._buf = self._buf[index + (len(marker) if marker != START else 0) :]
            if self._kind == "call":
                add_event(events, "content", self._canonical())
            self._phase = "between"
            return True
        keep = 0 if final else _held(self._buf, markers)
        self._take(events, self._buf[: len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep :]
        return False

    def _take(self, events: list[ReasoningEvent], text: str) -> None:
        if self._kind == "call":
            self._call_body += text
        else:
            add_event(events, "reasoning" if self._kind == "reasoning" else "content", text)


class HarmonyTags(ReasoningTags):
    """Harmony's channels as a family's reasoning "tags": the analysis channel's header and ``<|end|>``."""

    def stream(self, *, enabled: bool = True, primed: bool = False) -> HarmonyStream:
        return HarmonyStream()


HARMONY = HarmonyTags(f"{CHANNEL}analysis{MESSAGE}", "<|end|>")


def _read_calls(buf: str, final: bool, tools: Tools | None) -> Step | None:
    """A harmony message to ``functions.NAME`` (the canonical shape, or as the model wrote it)."""
    i = len(buf) - len(buf.lstrip())
    rest = buf[i:]
    if not rest:
        return Done(i) if final else None
    if rest.startswith(START):
        return Skip(i + len(START))
    head_end = rest.find(MESSAGE)
    if head_end < 0:
        if not final and any(rest.startswith(s) or s.startswith(rest) for s in (*_HEADER_STARTS, "assistant")):
            return None
        return Done(i)
    header = rest[:head_end]
    recipient = _RECIPIENT.search(header)
    if recipient is None:
        return Done(i)
    body_start = head_end + len(MESSAGE)
    ends = [(rest.find(m, body_start), m) for m in _ENDS]
    found = [(j, m) for j, m in ends if j >= 0]
    if not found:
        if not final:
            return None
        j, stop = len(rest), len(rest)
    else:
        j, marker = min(found)
        stop = j + len(marker)
    name = recipient.group(1).removeprefix("functions.")
    try:
        arguments = json.loads(rest[body_start:j]) if rest[body_start:j].strip() else {}
    except ValueError:
        arguments = None
    if not name or not isinstance(arguments, dict):
        return Bad(i + stop)
    return Found((Call(name, json.dumps(arguments, ensure_ascii=False)),), i + stop)


#: gpt-oss's calls: a harmony message whose header names a recipient.
HARMONY_CALLS = BlockCallFormat(
    name="harmony",
    openers=(f"{CHANNEL}commentary to=", f"{START}assistant to=", f"{CHANNEL}analysis to="),
    reader=_read_calls,
)
