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
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

from xinference.api.mcp.manager import McpHub, ToolInfo, ToolResult
from xinference.errors import McpError

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
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

#: one non-streamed chat turn: (messages, tool_choice) -> a ``chat.completion`` dict
ChatTurn = Callable[[list[dict[str, Any]], Any], Awaitable[dict[str, Any]]]
#: one streamed chat turn: (messages, tool_choice) -> its chunks in batches
StreamTurn = Callable[[list[dict[str, Any]], Any], Awaitable[AsyncIterator[list[dict[str, Any]]]]]


class ToolCaller(Protocol):
    """What runs a tool: a hub server (:class:`HubServer`) or a request's own session (``RemoteSession``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult: ...


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
        function: dict[str, Any] = {"name": self.exposed, "parameters": self.info.input_schema or {"type": "object"}}
        if self.info.description:
            function["description"] = self.info.description
        return {"type": "function", "function": function}


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
        client = frozenset(name for name in (_tool_name(t) for t in client_tools or []) if name)
        counts: dict[str, int] = {}
        for _, _, infos in servers:
            for info in infos:
                counts[_safe(info.name)] = counts.get(_safe(info.name), 0) + 1
        tools: dict[str, McpTool] = {}
        for server, caller, infos in servers:
            for info in infos:
                name = _safe(info.name)
                if counts[name] > 1 or name in client:
                    name = f"{server}__{name}"[:128]
                tools[name] = McpTool(name, server, info, caller)
        return cls(tools, client)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def chat_tools(self) -> list[dict[str, Any]]:
        return [tool.chat_tool() for tool in self.tools.values()]


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:128] or "tool"


def _tool_name(tool: dict[str, Any]) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _later_choice(choice: Any) -> Any:
    """The tool_choice of the turns after the first: a forced call was made, so the model may now answer."""
    if choice == "required" or isinstance(choice, dict):
        return "auto"
    return choice


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
    if tool is None:
        offered = sorted([*tools.tools, *tools.client_tools])
        record["error"] = f"no tool named {name!r}; the tools are: {', '.join(offered) or 'none'}"
    else:
        try:
            arguments = json.loads(record["arguments"] or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("the arguments must be a JSON object")
        except ValueError as exc:
            record["error"] = f"invalid arguments for {name!r}: {exc}"
        else:
            try:
                result = await tool.caller.call_tool(tool.info.name, arguments, timeout)
            except McpError as exc:
                record["error"] = exc.message
            else:
                if result.is_error:
                    record["error"] = result.output or "the tool reported an error"
                else:
                    record["output"] = result.output
    record["status"] = "failed" if record["error"] is not None else "completed"


def _tool_message(record: dict[str, Any]) -> dict[str, Any]:
    content = record["output"] if record["error"] is None else f"Error: {record['error']}"
    return {"role": "tool", "tool_call_id": record["id"], "content": content}


def _assistant(message: dict[str, Any], calls: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn as it goes back to the model: its text and the calls that were run (under the ids their
    results answer)."""
    sent = [
        {"id": record["id"], "type": "function", "function": dict(call.get("function") or {})}
        for call, record in zip(calls, records, strict=True)
    ]
    return {"role": "assistant", "content": message.get("content") or "", "tool_calls": sent}


def _add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if not usage:
        return total
    if total is None:
        return dict(usage)
    merged = dict(total)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        merged[key] = int(total.get(key) or 0) + int(usage.get(key) or 0)
    return merged


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
        usage = _add_usage(usage, result.get("usage"))
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
        messages += [_assistant(message, split.mcp, made), *(_tool_message(r) for r in made)]
        choice, rounds = _later_choice(choice), rounds + 1
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
        slot = state.calls.setdefault(
            int(call.get("index", 0)), {"type": "function", "function": {"name": "", "arguments": ""}}
        )
        if call.get("id"):
            slot["id"] = call["id"]
        function = call.get("function") or {}
        slot["function"]["name"] += function.get("name") or ""
        slot["function"]["arguments"] += function.get("arguments") or ""
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


def _calls_chunk(template: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    deltas = [
        {"index": n, "id": call.get("id"), "type": "function", "function": dict(call["function"])}
        for n, call in enumerate(calls)
    ]
    return {**template, "choices": [{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": None}]}


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
        usage = _add_usage(usage, state.usage)
        calls = [state.calls[i] for i in sorted(state.calls)]
        split = _split(calls, tools)
        if split.mcp and rounds < max_rounds:
            made = [_record(call, tools) for call in split.mcp]
            for record, call in zip(made, split.mcp, strict=True):
                yield [_call_chunk(template, record)]
                await _execute(record, call, tools, timeout)
                yield [_call_chunk(template, record)]
            if not split.client:
                messages += [_assistant(state.message, split.mcp, made), *(_tool_message(r) for r in made)]
                choice, rounds = _later_choice(choice), rounds + 1
                continue
        tail: list[dict[str, Any]] = []
        if split.client:
            tail.append(_calls_chunk(template, split.client))
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
