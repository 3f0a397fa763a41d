"""Reasoning separated from the answer: ``<think>...</think>`` and any other tag pair a family declares.

A message may

- open with the start tag (Qwen3, most reasoning models): the text up to the end tag is reasoning;
- lack the start tag because the chat template already put it in the prompt (DeepSeek-R1 and its distills,
  Qwen3-2507-Thinking): the engine says so with ``primed=True`` when it sees the rendered prompt end with the tag,
  or the family declares ``reasoning_starts_inside``; a start tag the model writes anyway is dropped. Without that
  knowledge the text is held back until the end tag shows (then it was reasoning) or the message ends (then it
  was the answer: an answer never lands in ``reasoning_content`` for want of a tag);
- carry no reasoning at all.

With thinking off (``enabled=False``) the text streams as content at once, and any tag the model writes anyway is
removed from it: a block it still produced goes to reasoning, never into the content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from xinference.model.parsers.base import StepStream

__all__ = ["ReasoningEvent", "ReasoningSplitter", "ReasoningStream", "ReasoningTags", "split_reasoning"]

#: ``("reasoning" | "content", text)``
ReasoningEvent = tuple[Literal["reasoning", "content"], str]


@dataclass(frozen=True)
class ReasoningTags:
    """The tags around a family's reasoning."""

    start: str = "<think>"
    end: str = "</think>"

    def stream(self, *, enabled: bool = True, primed: bool = False) -> ReasoningSplitter:
        return ReasoningStream(self, enabled=enabled, primed=primed)


class ReasoningSplitter(Protocol):
    """What a family's reasoning parser does (:class:`ReasoningStream`, or harmony's channel splitter)."""

    def feed(self, delta: str) -> list[ReasoningEvent]: ...

    def finish(self) -> list[ReasoningEvent]: ...


class ReasoningStream(StepStream[ReasoningEvent]):
    """Incremental splitter of one message; ``feed(delta)`` then ``finish()``, each returns events in order."""

    def __init__(self, tags: ReasoningTags, *, enabled: bool = True, primed: bool = False) -> None:
        self.tags = tags
        self.enabled = enabled
        self._buf = ""
        # opening: before the first non-blank text; undecided: text that is reasoning only if an end tag follows
        self._phase: Literal["opening", "reasoning", "undecided", "content"] = "reasoning" if primed else "opening"
        self._at_section_start = True  # blanks at the start of a section are dropped
        self._echo_possible = primed  # a primed reply may still open with the start tag: it is dropped

    def finish(self) -> list[ReasoningEvent]:
        events = self._drain(final=True)
        if self._buf:
            kind: Literal["reasoning", "content"] = "reasoning" if self._phase == "reasoning" else "content"
            self._emit(events, kind, self._buf)
            self._buf = ""
        return events

    def _step(self, events: list[ReasoningEvent], final: bool) -> bool:
        start, end = self.tags.start, self.tags.end
        if self._phase == "opening":
            stripped = self._buf.lstrip()
            if not stripped:
                return False
            if stripped.startswith(start):
                self._buf, self._phase, self._at_section_start = stripped[len(start) :], "reasoning", True
                return True
            if start.startswith(stripped) and not final:
                return False  # the start tag may be forming
            self._phase = "undecided" if self.enabled else "content"
            return True
        if self._echo_possible:
            stripped = self._buf.lstrip()
            if not stripped or (start.startswith(stripped) and stripped != start and not final):
                return False  # blanks, or the start tag forming
            self._echo_possible = False
            if stripped.startswith(start):
                self._buf = stripped[len(start) :]
            return True
        if self._phase in ("reasoning", "undecided"):
            index = self._buf.find(end)
            if index >= 0:
                self._emit(events, "reasoning", self._buf[:index])
                self._buf, self._phase, self._at_section_start = self._buf[index + len(end) :], "content", True
                return True
            if self._phase == "undecided":
                return False  # held until an end tag or the end of the message decides
            keep = 0 if final else _held_suffix(self._buf, end)
            self._emit(events, "reasoning", self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        return self._content_step(events, final)

    def _content_step(self, events: list[ReasoningEvent], final: bool) -> bool:
        """Content; a stray tag pair (the model reasoned again, or thinking was off) is taken out of it."""
        start, end = self.tags.start, self.tags.end
        index = self._buf.find(start)
        stray_end = self._buf.find(end)
        if stray_end >= 0 and (index < 0 or stray_end < index):
            self._emit(events, "content", self._buf[:stray_end])
            self._buf = self._buf[stray_end + len(end) :]
            return True
        if index >= 0:
            self._emit(events, "content", self._buf[:index])
            self._buf, self._phase, self._at_section_start = self._buf[index + len(start) :], "reasoning", True
            return True
        keep = 0 if final else max(_held_suffix(self._buf, start), _held_suffix(self._buf, end))
        self._emit(events, "content", self._buf[: len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep :]
        return False

    def _emit(self, events: list[ReasoningEvent], kind: Literal["reasoning", "content"], text: str) -> None:
        if self._at_section_start:
            text = text.lstrip()
            if not text:
                return
            self._at_section_start = False
        add_event(events, kind, text)


def add_event(events: list[ReasoningEvent], kind: Literal["reasoning", "content"], text: str) -> None:
    """Append ``text`` of ``kind`` to ``events``, joined to the last event when it is of the same kind (nothing
    for empty text)."""
    if not text:
        return
    if events and events[-1][0] == kind:
        events[-1] = (kind, events[-1][1] + text)
    else:
        events.append((kind, text))


def _held_suffix(text: str, marker: str) -> int:
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


def split_reasoning(
    tags: ReasoningTags, text: str, *, enabled: bool = True, primed: bool = False
) -> tuple[str | None, str]:
    """``(reasoning or None, content)`` of a whole message; trailing blanks of the reasoning are dropped."""
    stream = tags.stream(enabled=enabled, primed=primed)
    reasoning: list[str] = []
    content: list[str] = []
    for kind, piece in stream.feed(text) + stream.finish():
        (reasoning if kind == "reasoning" else content).append(piece)
    thought = "".join(reasoning).rstrip()
    return (thought or None), "".join(content)
