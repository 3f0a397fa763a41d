"""Turn an engine's raw chat output into OpenAI's ``reasoning_content`` / ``tool_calls`` shape.

For engines that do not parse tool calls and reasoning themselves (Transformers, MLX, llama.cpp with templates it
does not recognise, vLLM without its parsers). It runs in the model process, on whole responses or on
``chat.completion.chunk`` dicts as the engine produces them. Usage::

    parser = ChatOutputParser.for_request(family, request)          # None: nothing to parse for this request
    if parser is not None:
        response = parser.fix_response(response)                     # a whole ``chat.completion``

    rewriter = parser.stream()                                       # one per streamed request
    for chunk in engine_chunks:
        for out in rewriter.process(chunk):                          # 0..n chunks per chunk
            stream.push(out)

What it guarantees: text before a tool call stays content; streamed calls come as ``tool_calls`` deltas whose
first piece carries ``id``, ``type`` and ``function.name`` and whose later pieces carry ``arguments`` text, with
stable ``index`` per call; a choice that made a call ends with ``finish_reason: "tool_calls"`` (``"length"`` stays
``"length"``); with thinking off (``enable_thinking: false`` at the top level or in ``chat_template_kwargs``) no
reasoning tag reaches the content. Fields an engine already filled natively (``tool_calls``,
``reasoning_content``) are kept as they are and only ``content`` is parsed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xinference.model.parsers.base import ParsedCall, ToolCallDelta
from xinference.model.parsers.reasoning import ReasoningSplitter, ReasoningTags
from xinference.model.parsers.registry import reasoning_starts_inside, reasoning_tags_of, tool_call_format_of
from xinference.model.parsers.tool_calls import CallStream, ToolCallFormat, Tools, parse_tool_calls

if TYPE_CHECKING:
    from xinference.model.spec import ModelFamily

__all__ = ["BARE_JSON_CALLS", "ChatOutputParser", "ChunkRewriter", "thinking_enabled", "wants_tool_parsing"]

#: keys every rewritten chunk repeats; any other top-level key (``usage``) goes on the last chunk made from a chunk
_CHUNK_IDENTITY = frozenset({"id", "object", "created", "model", "system_fingerprint"})

#: Calls written as bare JSON objects (what a forced call's grammar makes a model without a format of its own write).
BARE_JSON_CALLS = ToolCallFormat(name="json", opens_on_json=True, separators=(";", ",", "[", "]"))


def thinking_enabled(request: dict[str, Any]) -> bool:
    """``enable_thinking`` of the request (top level or ``chat_template_kwargs``); default on."""
    kwargs = request.get("chat_template_kwargs") or {}
    for value in (request.get("enable_thinking"), kwargs.get("enable_thinking"), kwargs.get("thinking")):
        if value is not None:
            return bool(value)
    return True


def wants_tool_parsing(request: dict[str, Any]) -> bool:
    """Tools were given and ``tool_choice`` is not ``none``."""
    return bool(request.get("tools")) and request.get("tool_choice") != "none"


@dataclass
class ChatOutputParser:
    """The parsers one request needs; build it with :meth:`for_request`."""

    tool_format: ToolCallFormat | None = None
    reasoning: ReasoningTags | None = None
    thinking: bool = True
    #: the prompt already ends inside the reasoning (the template wrote the start tag)
    primed: bool = False
    #: ``parallel_tool_calls`` (False: a message keeps its first call only)
    parallel: bool = True
    #: the request's tools: formats that write raw text values type them by the tools' parameter schemas
    tools: Tools | None = None

    @classmethod
    def for_request(
        cls,
        family: ModelFamily,
        request: dict[str, Any],
        *,
        primed: bool = False,
        tool_format: ToolCallFormat | None = None,
    ) -> ChatOutputParser | None:
        """The parser for ``request`` on ``family``, or None when there is nothing to parse.

        ``tool_format`` overrides the family's (a forced call rendered as bare JSON uses :data:`BARE_JSON_CALLS`).
        ``primed`` is what the engine saw in the rendered prompt; a family declaring ``reasoning_starts_inside`` is
        primed whenever thinking is on.
        """
        fmt = (tool_format or tool_call_format_of(family)) if wants_tool_parsing(request) else None
        tags = reasoning_tags_of(family)
        if fmt is None and tags is None:
            return None
        return cls(
            tool_format=fmt,
            reasoning=tags,
            thinking=thinking_enabled(request),
            primed=primed or (tags is not None and reasoning_starts_inside(family)),
            parallel=request.get("parallel_tool_calls") is not False,
            tools=request.get("tools") if isinstance(request.get("tools"), list) else None,
        )

    # -- whole responses ----------------------------------------------------------------------------------------
    def parse_text(self, text: str) -> tuple[str | None, str | None, list[ParsedCall]]:
        """``(reasoning, content, calls)`` of one whole message."""
        reasoning: str | None = None
        if self.reasoning is not None:
            stream = self.reasoning.stream(enabled=self.thinking, primed=self.primed and self.thinking)
            parts: dict[str, list[str]] = {"reasoning": [], "content": []}
            for kind, piece in stream.feed(text) + stream.finish():
                parts[kind].append(piece)
            reasoning = "".join(parts["reasoning"]).rstrip() or None
            text = "".join(parts["content"])
        calls: list[ParsedCall] = []
        if self.tool_format is not None:
            text, calls = parse_tool_calls(self.tool_format, text, self.tools)
            if not self.parallel:
                del calls[1:]
            if calls and not text.strip():
                text = ""
        return reasoning, (text or None) if calls else text, calls

    def fix_response(self, response: dict[str, Any]) -> dict[str, Any]:
        """Rewrite every choice of a ``chat.completion`` dict in place; returns it."""
        for choice in response.get("choices") or ():
            message = choice.get("message") or {}
            content = message.get("content")
            if not isinstance(content, str):
                continue
            parser = ChatOutputParser(
                tool_format=None if message.get("tool_calls") else self.tool_format,
                reasoning=None if message.get("reasoning_content") else self.reasoning,
                thinking=self.thinking,
                primed=self.primed,
                parallel=self.parallel,
                tools=self.tools,
            )
            reasoning, text, calls = parser.parse_text(content)
            message["content"] = text
            if reasoning is not None:
                message["reasoning_content"] = reasoning
            if calls:
                message["tool_calls"] = [call.to_openai() for call in calls]
                if choice.get("finish_reason") in (None, "stop"):
                    choice["finish_reason"] = "tool_calls"
        return response

    # -- streams --------------------------------------------------------------------------------------------------
    def stream(self) -> ChunkRewriter:
        return ChunkRewriter(self)


class _ChoiceState:
    """The parsers of one streamed choice."""

    def __init__(self, parser: ChatOutputParser) -> None:
        tags = parser.reasoning
        self.reasoning: ReasoningSplitter | None = (
            tags.stream(enabled=parser.thinking, primed=parser.primed and parser.thinking) if tags else None
        )
        self.tools: CallStream | None = parser.tool_format.stream(parser.tools) if parser.tool_format else None
        self.made_calls = False
        self.native_calls = False
        self.max_calls = None if parser.parallel else 1

    def feed(self, text: str, final: bool) -> list[dict[str, Any]]:
        """Deltas (``content`` / ``reasoning_content`` / ``tool_calls``) for new raw text."""
        pieces: list[tuple[str, str]] = []
        if self.reasoning is not None:
            events = self.reasoning.feed(text) if text else []
            if final:
                events += self.reasoning.finish()
            pieces = [(kind, piece) for kind, piece in events]
        else:
            pieces = [("content", text)] if text else []
        deltas: list[dict[str, Any]] = []
        for kind, piece in pieces:
            if kind == "reasoning":
                deltas.append({"reasoning_content": piece})
            else:
                deltas.extend(self._content(piece))
        if final and self.tools is not None:
            deltas.extend(self._tool_deltas(self.tools.finish()))
        return deltas

    def settle_reasoning(self) -> list[dict[str, Any]]:
        """Stop parsing reasoning (the engine does it); returns the deltas of the text held so far."""
        assert self.reasoning is not None
        events, self.reasoning = self.reasoning.finish(), None
        deltas: list[dict[str, Any]] = []
        for kind, piece in events:
            deltas.extend([{"reasoning_content": piece}] if kind == "reasoning" else self._content(piece))
        return deltas

    def _content(self, text: str) -> list[dict[str, Any]]:
        if self.tools is None or self.native_calls:
            return [{"content": text}] if text else []
        return self._tool_deltas(self.tools.feed(text))

    def _tool_deltas(self, events: list[str | ToolCallDelta]) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = []
        for event in events:
            if isinstance(event, str):
                if event:
                    deltas.append({"content": event})
            elif self.max_calls is None or event.index < self.max_calls:
                self.made_calls = True
                deltas.append({"tool_calls": [event.to_openai()]})
        return deltas


class ChunkRewriter:
    """Rewrites one streamed request's ``chat.completion.chunk`` dicts (any number of choices)."""

    def __init__(self, parser: ChatOutputParser) -> None:
        self.parser = parser
        self._choices: dict[int, _ChoiceState] = {}

    def process(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunks to send for one engine chunk: none while text is held back, several when it splits."""
        choices = chunk.get("choices") or []
        if not choices:
            return [chunk]
        out: list[dict[str, Any]] = []
        for choice in choices:
            out.extend(self._choice_chunks(chunk, choice))
        return out

    def _choice_chunks(self, chunk: dict[str, Any], choice: dict[str, Any]) -> list[dict[str, Any]]:
        index = int(choice.get("index", 0))
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceState(self.parser)
        delta = dict(choice.get("delta") or {})
        finish = choice.get("finish_reason")
        if delta.get("tool_calls"):
            state.native_calls = True
        text = delta.pop("content", None) or ""
        held: list[dict[str, Any]] = []
        if delta.get("reasoning_content") and state.reasoning is not None:
            # the engine separates reasoning itself: what our parser held back goes out as it would have
            held = state.settle_reasoning()
        head = {k: v for k, v in delta.items() if k != "content"}  # role, native fields: in order, after held text
        if "role" in head:
            head["content"] = ""
        new = held + ([head] if head else []) + state.feed(text, final=finish is not None)
        if finish == "stop" and state.made_calls:
            finish = "tool_calls"
        extra = {k: v for k, v in choice.items() if k not in ("index", "delta", "finish_reason")}
        base = {k: v for k, v in chunk.items() if k in _CHUNK_IDENTITY}
        tail = {k: v for k, v in chunk.items() if k != "choices" and k not in _CHUNK_IDENTITY}  # usage, ...
        if not new:
            if finish is None and not extra and not tail:
                return []  # held back
            new = [{}]
        result = []
        for i, piece in enumerate(new):
            last = i == len(new) - 1
            out_choice: dict[str, Any] = {"index": index, "delta": piece, "finish_reason": finish if last else None}
            if i == 0:
                out_choice.update(copy.copy(extra))
            result.append({**base, "choices": [out_choice], **(tail if last else {})})
        return result
