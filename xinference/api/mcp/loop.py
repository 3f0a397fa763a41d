"""The MCP tool loop: offer MCP tools to a model, run the calls it makes to them, feed the results back, repeat.

Any API that ends in chat turns uses it (chat completions here; Responses and Anthropic Messages translate their
own shapes around it). The caller gives "one chat turn" as a callable over the messages so far, and a
:class:`ToolSet` (the MCP tools offered, by the name the model sees, each with the session that runs it):

- :func:`run_tool_loop` for a whole response: returns the last turn's result with ``mcp_calls`` and the usage of
  every turn added up;
- :func:`stream_tool_loop` for a stream: yields chat chunks in batches as the model makes them, holds back a turn's
  tool-call deltas until the turn ends, and yields an ``mcp_call`` chunk (``"choices": []``) when each call starts
  (``in_progress``) and when it ends (``completed``/``failed``).

Rules (doc/mcp.md): at most ``max_rounds`` rounds of calls; then one more turn with ``tool_choice: "none"`` so the
model answers with what it has. A forced ``tool_choice`` (``required`` or a named function) applies to the first
turn only, or the model could never stop calling. A call to a name that is neither an MCP tool nor one of the
client's is answered to the model with an error listing the tools. A call that fails (the server is down, the tool
raised, the timeout passed, the arguments are not JSON) is answered to the model with its error: the model decides
what to tell the user. When a turn calls one of the client's own tools, its MCP calls are run (and reported) and the
client's calls are returned to the client as usual.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from xinference.api.mcp.manager import McpHub, ToolInfo, ToolResult
from xinference.api.mcp.tools import (
    ToolCaller,
    add_call_delta,
    add_usage,
    calls_chunk,
    chat_tool,
    client_tool_names,
    expose_names,
    later_choice,
    run_call,
    tool_message,
)

__all__ = [
    "DEFAULT_MAX_TOOL_ROUNDS",
    "ChatTurn",
    "HubServer",
    "McpTool",
    "StreamTurn",
    "ToolCaller",
    "ToolSet",
    "run_tool_loop",
    "stream_tool_loop",
]

DEFAULT_MAX_TOOL_ROUNDS = 8

#: one non-streamed chat turn: (messages, tool_choice) -> a ``chat.completion`` dict
ChatTurn = Callable[[list[dict[str, Any]], Any], Awaitable[dict[str, Any]]]
#: one streamed chat turn: (messages, tool_choice) -> its chunks in batches
StreamTurn = Callable[[list[dict[str, Any]], Any], Awaitable[AsyncIterator[list[dict[str, Any]]]]]


@dataclass(frozen=True)
class HubServer:
    """A configured server of the hub, as a :class:`ToolCaller`."""

    hub: McpHub
    server: str

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
        return await self.hub.call_tool(self.server, name, arguments, timeout)


@dataclass(frozen=True)
class McpTool:
    """One MCP tool offered to the model: ``exposed`` is the name the model sees (the tool's own, or
    ``server__tool`` when another offered tool has that name)."""

    exposed: str
    server: str
    info: ToolInfo
    caller: ToolCaller

    def chat_tool(self) -> dict[str, Any]:
        return chat_tool(self.exposed, self.info)


@dataclass
class ToolSet:
    """The MCP tools of one request, by exposed name, and the names of the client's own tools."""

    tools: dict[str, McpTool] = field(default_factory=dict)
    client_tools: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls, servers: list[tuple[str, ToolCaller, list[ToolInfo]]], client_tools: list[dict[str, Any]] | None = None
    ) -> ToolSet:
        """Name every server's tools for the model: a name offered once is kept; a name two servers share, or one
        the client's tools use, becomes ``server__tool``. Characters a tool name may not have become ``_``."""
        client = client_tool_names(client_tools)
        tools: dict[str, McpTool] = {}
        for name, index, info in expose_names([(server, infos) for server, _, infos in servers], client):
            server, caller, _ = servers[index]
            tools[name] = McpTool(name, server, info, caller)
        return cls(tools, client)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def chat_tools(self) -> list[dict[str, Any]]:
        return [tool.chat_tool() for tool in self.tools.values()]


# -- running the calls of one turn ------------------------------------------------------------------------------------
@dataclass
class _Round:
    """The calls of one assistant turn, split by who runs them."""

    mcp: list[dict[str, Any]]
    client: list[dict[str, Any]]


def _split(calls: list[dict[str, Any]], tools: ToolSet) -> _Round:
    mine = [c for c in calls if (c.get("function") or {}).get("name") not in tools.client_tools]
    theirs = [c for c in calls if (c.get("function") or {}).get("name") in tools.client_tools]
    return _Round(mine, theirs)


def _record(call: dict[str, Any], tools: ToolSet) -> dict[str, Any]:
    function = call.get("function") or {}
    tool = tools.tools.get(function.get("name", ""))
    arguments = function.get("arguments")
    return {
        "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
        "server": tool.server if tool is not None else None,
        "name": tool.info.name if tool is not None else str(function.get("name", "")),
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
        "output": None,
        "error": None,
        "status": "in_progress",
    }


async def _execute(record: dict[str, Any], call: dict[str, Any], tools: ToolSet, timeout: float | None) -> None:
    """Run one call and fill its record's output or error (never raises for the tool's sake)."""
    name = (call.get("function") or {}).get("name", "")
    tool = tools.tools.get(name)
    outcome = await run_call(
        tool.caller if tool is not None else None,
        tool.info.name if tool is not None else name,
        record["arguments"],
        timeout,
        shown_as=name,
        offered=[*tools.tools, *tools.client_tools],
    )
    record["output"], record["error"] = outcome.output, outcome.error
    record["status"] = "failed" if record["error"] is not None else "completed"


def _assistant(message: dict[str, Any], calls: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn as it goes back to the model: its text and the calls that were run (under the ids their
    results answer)."""
    sent = [
        {"id": record["id"], "type": "function", "function": dict(call.get("function") or {})}
        for call, record in zip(calls, records, strict=True)
    ]
    return {"role": "assistant", "content": message.get("content") or "", "tool_calls": sent}


# -- whole responses --------------------------------------------------------------------------------------------------
async def run_tool_loop(
    turn: ChatTurn,
    messages: list[dict[str, Any]],
    tools: ToolSet,
    tool_choice: Any = None,
    max_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Turns until the model answers without MCP calls (or the rounds run out); the last turn's result with
    ``mcp_calls`` (every call made, in order) and the usage of all turns."""
    messages = list(messages)
    records: list[dict[str, Any]] = []
    usage: dict[str, Any] | None = None
    choice, rounds = tool_choice, 0
    while True:
        result = await turn(messages, "none" if rounds >= max_rounds else choice)
        usage = add_usage(usage, result.get("usage"))
        message = (result.get("choices") or [{}])[0].get("message") or {}
        calls = message.get("tool_calls") or []
        split = _split(calls, tools)
        if not split.mcp or rounds >= max_rounds:
            break
        made = [_record(call, tools) for call in split.mcp]
        for record, call in zip(made, split.mcp, strict=True):
            await _execute(record, call, tools, timeout)
        records += made
        if split.client:
            break  # the client runs its own calls; the MCP ones of this turn are reported in mcp_calls
        messages += [_assistant(message, split.mcp, made), *(tool_message(r) for r in made)]
        choice, rounds = later_choice(choice), rounds + 1
    _only_client_calls(result, split)
    if usage is not None:
        result["usage"] = usage
    result["mcp_calls"] = records
    return result


def _only_client_calls(result: dict[str, Any], split: _Round) -> None:
    """The final message keeps the client's tool calls only (an MCP call the rounds left no room for is dropped)."""
    choices = result.get("choices") or []
    if not choices or not split.mcp:
        return
    message = choices[0].get("message") or {}
    message["tool_calls"] = split.client or None
    if not split.client:
        message.pop("tool_calls", None)
        if choices[0].get("finish_reason") == "tool_calls":
            choices[0]["finish_reason"] = "stop"


# -- streams ----------------------------------------------------------------------------------------------------------
@dataclass
class _TurnState:
    """What one streamed turn produced besides what was already passed on."""

    message: dict[str, Any] = field(default_factory=lambda: {"content": ""})
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish: dict[str, Any] | None = None  # the chunk carrying finish_reason, held until the turn is judged
    usage: dict[str, Any] | None = None
    template: dict[str, Any] = field(default_factory=dict)  # id, object, created, model of the stream's chunks


def _absorb(chunk: dict[str, Any], state: _TurnState, first_turn: bool) -> dict[str, Any] | None:
    """Take one chunk into ``state``; returns what may be passed on now (content, reasoning), or None."""
    if not state.template:
        state.template = {k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk}
    if chunk.get("usage"):
        state.usage = chunk["usage"]
    choices = chunk.get("choices") or []
    if not choices:
        return None
    choice = choices[0]
    delta = dict(choice.get("delta") or {})
    for call in delta.pop("tool_calls", None) or []:
        add_call_delta(state.calls, call)
    if delta.get("content"):
        state.message["content"] += delta["content"]
    if choice.get("finish_reason"):
        state.finish = {**chunk, "choices": [{**choice, "delta": {}}]}
        state.finish.pop("usage", None)
        delta = {k: v for k, v in delta.items() if k in ("role", "content", "reasoning_content") and v}
        if not (set(delta) - {"role"}):
            return None
    if not first_turn:
        delta.pop("role", None)
    if not delta:
        return None
    out = {**chunk, "choices": [{**choice, "delta": delta, "finish_reason": None}]}
    out.pop("usage", None)
    return out


def _call_chunk(template: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    return {**template, "object": "chat.completion.chunk", "choices": [], "mcp_call": dict(record)}


async def stream_tool_loop(
    turn: StreamTurn,
    messages: list[dict[str, Any]],
    tools: ToolSet,
    tool_choice: Any = None,
    max_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    timeout: float | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """The streamed form of :func:`run_tool_loop`: chunk batches, with ``mcp_call`` chunks around each call. The
    usage chunk (when the turns send one) comes last and adds up every turn."""
    messages = list(messages)
    usage: dict[str, Any] | None = None
    choice, rounds = tool_choice, 0
    template: dict[str, Any] = {}
    while True:
        state = _TurnState()
        batches = await turn(messages, "none" if rounds >= max_rounds else choice)
        async with contextlib.aclosing(batches):  # type: ignore[type-var]
            async for batch in batches:
                out = [c for c in (_absorb(chunk, state, rounds == 0) for chunk in batch) if c is not None]
                template = template or state.template
                if out:
                    yield [{**chunk, **template} for chunk in out]  # every turn's chunks under the first one's id
        template = template or state.template
        usage = add_usage(usage, state.usage)
        calls = [state.calls[i] for i in sorted(state.calls)]
        split = _split(calls, tools)
        if split.mcp and rounds < max_rounds:
            made = [_record(call, tools) for call in split.mcp]
            for record, call in zip(made, split.mcp, strict=True):
                yield [_call_chunk(template, record)]
                await _execute(record, call, tools, timeout)
                yield [_call_chunk(template, record)]
            if not split.client:
                messages += [_assistant(state.message, split.mcp, made), *(tool_message(r) for r in made)]
                choice, rounds = later_choice(choice), rounds + 1
                continue
        tail: list[dict[str, Any]] = []
        if split.client:
            tail.append(calls_chunk(template, split.client))
        if state.finish is not None:
            finish = state.finish
            if split.mcp and not split.client:
                finish["choices"][0]["finish_reason"] = "stop"
            tail.append({**finish, **template})
        if usage is not None:
            tail.append({**template, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        if tail:
            yield tail
        return
