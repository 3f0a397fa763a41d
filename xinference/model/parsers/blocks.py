"""The machinery of the formats whose calls are not one JSON object each (XML-like tags, special-token sections,
Python call syntax): a *reader* per format says what the text at the head of a call region is, and
:class:`BlockCallStream` does the rest (content around the calls, markers held back while partial, malformed
calls given back as content).

A reader is a pure function ``read(buf, final, tools) -> Step | None`` over the text from the start of the region
(the opener included, or the start of the message for formats that may open there):

- :class:`Found` -- complete calls at the head of ``buf`` (their first ``end`` characters);
- :class:`Skip` -- a marker between calls (a section opener or closer), consumed silently;
- :class:`Done` -- the region is over: what follows is content (``end`` blank characters consumed);
- :class:`Bad` -- the head (its first ``end`` characters) looks like a call but is not one: it stays content;
- ``None`` -- the answer depends on text not yet generated (never returned when ``final``).

Each answer depends only on the text, never on how it was chunked, so a stream and the whole-text parse agree.
Calls are announced whole, when their closing marker arrives (these formats cannot be turned into OpenAI's JSON
arguments piece by piece without guessing the types of values still being written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

from xinference.model.parsers.base import StepStream, ToolCallDelta, new_call_id
from xinference.model.parsers.tool_calls import ToolCallFormat, ToolEvent, Tools, _held_suffix

__all__ = [
    "Bad",
    "BlockCallFormat",
    "BlockCallStream",
    "Call",
    "Done",
    "Found",
    "InnerParser",
    "Reader",
    "Skip",
    "Step",
    "read_block",
]


@dataclass(frozen=True)
class Call:
    """One parsed call: ``arguments`` is a JSON object text; ``id`` the model's own id when it writes one (Kimi)."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Found:
    calls: tuple[Call, ...]
    end: int


@dataclass(frozen=True)
class Skip:
    end: int


@dataclass(frozen=True)
class Done:
    end: int


@dataclass(frozen=True)
class Bad:
    end: int


Step = Union[Found, Skip, Done, Bad]
#: ``(buffer from the region's start, whether the message ended, the request's tools) -> step or None``
Reader = Callable[[str, bool, "Tools | None"], "Step | None"]
#: ``(text between a call's markers, tools) -> its calls (empty: not a call)``
InnerParser = Callable[[str, "Tools | None"], "list[Call]"]


def _never(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return Done(0)


@dataclass(frozen=True)
class BlockCallFormat(ToolCallFormat):
    """A tool-call format read by ``reader``; ``openers`` start a region anywhere in the message, ``at_start``
    lets the message's first characters start one too (Python-style lists, GLM-4's ``name\\n{...}``)."""

    reader: Reader = field(default=_never, compare=False)
    at_start: bool = False

    def stream(self, tools: Tools | None = None) -> BlockCallStream:
        return BlockCallStream(self, tools)


class BlockCallStream(StepStream[ToolEvent]):
    """Incremental parser of one message for a :class:`BlockCallFormat`."""

    def __init__(self, fmt: BlockCallFormat, tools: Tools | None = None) -> None:
        self.fmt = fmt
        self.tools = tools
        self.calls = 0
        self._buf = ""
        self._in_calls = False
        self._start_tried = not fmt.at_start
        self._pending = ""  # region text consumed by Skip since the last call (given back if no call follows)
        self._region_calls = 0
        self._opener_len = 0  # a Bad region that began at an opener gives back at least the opener

    def finish(self) -> list[ToolEvent]:
        events = self._drain(final=True)
        if self._in_calls:  # markers with no call after them (a section opener the message ended on): content
            self._give_back(events, ("" if self._region_calls else self._pending) + self._buf)
            self._buf, self._pending, self._in_calls = "", "", False
        return events

    def _step(self, events: list[ToolEvent], final: bool) -> bool:
        return self._calls_step(events, final) if self._in_calls else self._content_step(events, final)

    def _enter(self, opener_len: int) -> None:
        self._in_calls, self._pending, self._region_calls, self._opener_len = True, "", 0, opener_len

    def _content_step(self, events: list[ToolEvent], final: bool) -> bool:
        buf = self._buf
        if not self._start_tried:
            if not buf.strip() and not final:
                return False  # blanks: the message may still open with a call
            self._start_tried = True
            self._enter(0)
            return True
        hits = [(i, m) for i, m in ((buf.find(m), m) for m in self.fmt.openers) if i >= 0]
        if hits:
            index, marker = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
            if index:
                events.append(buf[:index])
            self._buf = buf[index:]
            self._enter(len(marker))
            return True
        keep = 0 if final else _held_suffix(buf, self.fmt.openers)
        if len(buf) > keep:
            events.append(buf[: len(buf) - keep])
            self._buf = buf[len(buf) - keep :]
        return False

    def _calls_step(self, events: list[ToolEvent], final: bool) -> bool:
        step = self.fmt.reader(self._buf, final, self.tools)
        if step is None:
            if not final:
                return False
            step = Bad(len(self._buf))
        if isinstance(step, Skip):
            self._pending += self._buf[: step.end]
            self._buf = self._buf[step.end :]
            return True
        if isinstance(step, Found):
            for call in step.calls:
                events.append(ToolCallDelta(index=self.calls, id=call.id or new_call_id(), name=call.name))
                events.append(ToolCallDelta(index=self.calls, arguments=call.arguments))
                self.calls += 1
            self._region_calls += len(step.calls)
            self._buf, self._pending = self._buf[step.end :], ""
            return True
        end = step.end
        if not self._region_calls and not self._pending:
            end = max(end, self._opener_len)  # the opener is given back, never read again as an opener
        if isinstance(step, Bad):
            end = max(end, 1)
        if isinstance(step, Bad) or not self._region_calls:
            self._give_back(events, self._pending + self._buf[:end])
        self._buf, self._pending, self._in_calls = self._buf[end:], "", False
        return True

    @staticmethod
    def _give_back(events: list[ToolEvent], text: str) -> None:
        if text:
            events.append(text)


def read_block(
    buf: str,
    final: bool,
    tools: Tools | None,
    *,
    begin: str,
    end: str,
    parse: InnerParser,
    skips: Sequence[str] = (),
    cut_ok: Callable[[str], bool] = lambda inner: True,
) -> Step | None:
    """The step of the common shape: blanks, then ``skips`` markers or a ``begin ... end`` call whose inner text
    ``parse`` reads. A call the message ends inside (its end marker can be a stop token the engine drops) is read
    when ``cut_ok(inner)`` says its last value is complete: a value cut by ``max_tokens`` never becomes an
    argument that looks whole (it stays content)."""
    i = len(buf) - len(buf.lstrip())
    rest = buf[i:]
    if not rest:
        return Done(i) if final else None
    for marker in skips:
        if rest.startswith(marker):
            return Skip(i + len(marker))
    if rest.startswith(begin):
        j = rest.find(end, len(begin))
        if j < 0:
            if not final:
                return None
            inner, stop = rest[len(begin) :], len(rest)
            if not cut_ok(inner):
                return Bad(i + stop)
        else:
            inner, stop = rest[len(begin) : j], j + len(end)
        calls = parse(inner, tools)
        return Found(tuple(calls), i + stop) if calls else Bad(i + stop)
    if not final and any(m.startswith(rest) for m in (*skips, begin)):
        return None
    return Done(i)
