"""MCP servers a request names in an agent API (the Responses ``mcp`` tool, Anthropic's ``mcp_servers``), and the
loop that lets the model use them.

The APIs translate their request into chat parameters and a list of :class:`HostedServer` (a configured server of
the hub by label, or a request-named URL opened with ``McpHub.open_url``, which checks
``XINFERENCE_MCP_ALLOWED_URLS``). :class:`HostedRun` then runs chat turns over the model's stream:

- each server's tools are offered to the model beside the client's own tools (a name two servers share, or one the
  client uses, becomes ``server__tool``), and each server not listed earlier in the conversation is announced first;
- a turn's calls to MCP tools are executed by the platform and fed back to the model, at most ``max_rounds`` rounds
  (then one more turn with ``tool_choice: "none"``); a forced ``tool_choice`` applies to the first turn only;
- a call whose tool needs the client's approval (the Responses ``require_approval``) is not executed: the run stops
  with an approval request, and a later request that approves it (``resume``) runs it first;
- calls to the client's own tools end the run and go back to the client as usual.

The run yields chat chunk batches as a chat stream would, plus chunks with ``"choices": []`` that each API turns
into its own items: ``mcp_list_tools`` (a server's tools), ``mcp_call`` (a call starting, ``status:
"in_progress"``, and again when it ends, ``completed`` or ``failed``, as chat completions report MCP calls) and
``mcp_approval_request``. A non-streamed request consumes the same chunks, so both forms give the same items.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from xinference.api.mcp.manager import ToolInfo
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
    "DEFAULT_MAX_ROUNDS",
    "HostedRun",
    "HostedServer",
    "HostedTool",
    "HostedTools",
    "OpenTurn",
    "ResumedCall",
    "ToolCaller",
]

DEFAULT_MAX_ROUNDS = 8

#: opens one streamed chat turn: (messages, tools, tool_choice) -> its chunk batches
OpenTurn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, Any], Awaitable[AsyncIterator[list[Any]]]]


@dataclass
class HostedServer:
    """One MCP server of a request: its label, what calls its tools, the tools offered (after the request's own
    filter), whether a call to a tool needs approval, and whether the conversation listed its tools already."""

    label: str
    caller: ToolCaller
    tools: list[ToolInfo]
    needs_approval: Callable[[str], bool] = lambda name: False
    listed: bool = False
    #: annotations of each tool (read-only hints), as listed
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostedTool:
    """One MCP tool as the model sees it: ``exposed`` is its name there."""

    exposed: str
    server: HostedServer
    info: ToolInfo

    def chat_tool(self) -> dict[str, Any]:
        return chat_tool(self.exposed, self.info)


@dataclass
class HostedTools:
    """The MCP tools of one request by exposed name, the names of the client's own tools, and the request's own
    sessions (closed with :meth:`aclose` when the request ends)."""

    servers: list[HostedServer]
    tools: dict[str, HostedTool]
    client_tools: frozenset[str]
    sessions: list[Any] = field(default_factory=list)

    @classmethod
    def build(
        cls, servers: list[HostedServer], client_tools: list[dict[str, Any]] | None, sessions: list[Any] | None = None
    ) -> HostedTools:
        client = client_tool_names(client_tools)
        named = expose_names([(server.label, server.tools) for server in servers], client)
        tools = {name: HostedTool(name, servers[index], info) for name, index, info in named}
        return cls(servers, tools, client, list(sessions or []))

    def chat_tools(self) -> list[dict[str, Any]]:
        return [tool.chat_tool() for tool in self.tools.values()]

    def exposed_name(self, label: str, name: str) -> str | None:
        """The name the model sees for tool ``name`` of server ``label``."""
        return next((t.exposed for t in self.tools.values() if t.server.label == label and t.info.name == name), None)

    async def aclose(self) -> None:
        for session in self.sessions:
            with contextlib.suppress(Exception):
                await session.aclose()
        self.sessions.clear()


@dataclass(frozen=True)
class ResumedCall:
    """A call held for approval by an earlier response, answered in this request: it runs (approved) or is
    answered to the model as declined, before the first turn."""

    approval_request_id: str
    approve: bool
    reason: str | None = None


@dataclass
class _Turn:
    """What one streamed turn produced besides the text passed on at once."""

    content: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None

    def absorb(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """Take one chunk in; returns what may be passed on now (text and reasoning deltas), or None."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return None
        choice = choices[0]
        delta = dict(choice.get("delta") or {})
        for call in delta.pop("tool_calls", None) or []:
            add_call_delta(self.calls, call)
        self.content += delta.get("content") or ""
        self.reasoning += delta.get("reasoning_content") or ""
        if choice.get("finish_reason"):
            self.finish = {k: v for k, v in chunk.items() if k != "usage"}
            self.finish["choices"] = [{**choice, "delta": {}}]
        passed = {k: v for k, v in delta.items() if k in ("content", "reasoning_content") and v}
        if not passed:
            return None
        out = {k: v for k, v in chunk.items() if k != "usage"}
        out["choices"] = [{**choice, "delta": passed, "finish_reason": None}]
        return out

    def message(self, calls: list[dict[str, Any]]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if calls:
            message["tool_calls"] = calls
        return message


class HostedRun:
    """One request's turns with its MCP tools (see the module's docstring). ``open()`` starts the first turn (its
    refusals raise there, before any byte is sent); iterating ``chunks()`` runs the rest. ``messages`` is the
    conversation as it grows (for the Responses store); ``approvals`` the calls held for approval, by request id."""

    def __init__(
        self,
        open_turn: OpenTurn,
        prefix: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: HostedTools,
        client_tools: list[dict[str, Any]] | None,
        tool_choice: Any,
        *,
        resume: list[ResumedCall] | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        timeout: float | None = None,
    ) -> None:
        self._open_turn = open_turn
        self._prefix = prefix
        self.messages = list(messages)
        self.tools = tools
        self._offered = [*(client_tools or []), *tools.chat_tools()] or None
        self._choice = tool_choice
        self._resume = list(resume or [])
        self._max_rounds = max_rounds
        self._timeout = timeout
        self._first: AsyncIterator[list[Any]] | None = None
        self.approvals: dict[str, dict[str, Any]] = {}

    async def open(self) -> None:
        """Open the first turn now when nothing has to run before it (a resumed call runs first, in ``chunks``)."""
        if not self._resume:
            self._first = await self._turn(self._choice, 0)

    async def _turn(self, choice: Any, rounds: int) -> AsyncIterator[list[Any]]:
        return await self._open_turn(
            self._prefix + self.messages, self._offered, "none" if rounds >= self._max_rounds else choice
        )

    async def chunks(self) -> AsyncIterator[list[dict[str, Any]]]:
        """The run's chunk batches (closing this iterator closes the turn's stream, which aborts it)."""
        template: dict[str, Any] = {"object": "chat.completion.chunk"}
        listing = [self._list_chunk(server) for server in self.tools.servers if not server.listed]
        if listing:
            yield listing
        for resumed in self._resume:
            async for batch in self._resumed(resumed, template):
                yield batch
        usage: dict[str, Any] | None = None
        choice, rounds = self._choice, 0
        batches = self._first
        self._first = None
        while True:
            turn = _Turn()
            batches = batches if batches is not None else await self._turn(choice, rounds)
            async with contextlib.aclosing(batches):  # type: ignore[type-var]
                async for batch in batches:
                    for chunk in batch:
                        if len(template) == 1:
                            template.update({k: chunk[k] for k in ("id", "created", "model") if k in chunk})
                    out = [c for c in (turn.absorb(chunk) for chunk in batch) if c is not None]
                    if out:
                        yield out
            batches = None
            usage = add_usage(usage, turn.usage)
            calls = [self._with_id(turn.calls[i]) for i in sorted(turn.calls)]
            mine = [c for c in calls if c["function"]["name"] not in self.tools.client_tools]
            theirs = [c for c in calls if c["function"]["name"] in self.tools.client_tools]
            if mine and rounds < self._max_rounds:
                async for batch in self._run_calls(turn, mine, theirs, template):
                    yield batch
                if not theirs and not self.approvals:
                    choice, rounds = later_choice(choice), rounds + 1
                    continue
            else:
                self.messages.append(turn.message(theirs))
            yield self._tail(turn, theirs, bool(mine), usage, template)
            return

    async def _run_calls(
        self, turn: _Turn, mine: list[dict[str, Any]], theirs: list[dict[str, Any]], template: dict[str, Any]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        held = [c for c in mine if self._needs_approval(c)]
        run = [c for c in mine if c not in held]
        for call in held:
            call["id"] = f"mcpr_{uuid.uuid4().hex}"  # the approval request's id: a later request answers it
        self.messages.append(turn.message(run + held + theirs))
        for call in run:
            record = self._record(call)
            async for batch in self._execute(record, call, template):
                yield batch
            self.messages.append(tool_message(record))
        for call in held:
            tool = self.tools.tools[call["function"]["name"]]
            request = {
                "id": call["id"],
                "server_label": tool.server.label,
                "name": tool.info.name,
                "arguments": call["function"]["arguments"] or "{}",
            }
            self.approvals[call["id"]] = request
            yield [{**template, "choices": [], "mcp_approval_request": request}]

    async def _resumed(self, resumed: ResumedCall, template: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        position, call = self._find_call(resumed.approval_request_id)
        if call is None:
            return
        record = self._record(call, resumed.approval_request_id)
        if resumed.approve:
            async for batch in self._execute(record, call, template):
                yield batch
        else:
            record["error"] = "the user did not approve this call" + (f": {resumed.reason}" if resumed.reason else "")
            record["status"] = "failed"
        self.messages.insert(position, tool_message(record))

    def _find_call(self, call_id: str) -> tuple[int, dict[str, Any] | None]:
        """Where the tool result of held call ``call_id`` goes (after its turn and the results already there)."""
        for index, message in enumerate(self.messages):
            for call in message.get("tool_calls") or []:
                if call.get("id") == call_id:
                    position = index + 1
                    while position < len(self.messages) and self.messages[position].get("role") == "tool":
                        position += 1
                    return position, call
        return len(self.messages), None

    def _needs_approval(self, call: dict[str, Any]) -> bool:
        tool = self.tools.tools.get(call["function"]["name"])
        return tool is not None and tool.server.needs_approval(tool.info.name)

    @staticmethod
    def _with_id(call: dict[str, Any]) -> dict[str, Any]:
        call.setdefault("id", f"call_{uuid.uuid4().hex[:24]}")
        return call

    def _record(self, call: dict[str, Any], approval_request_id: str | None = None) -> dict[str, Any]:
        name = call["function"]["name"]
        tool = self.tools.tools.get(name)
        arguments = call["function"].get("arguments")
        return {
            "id": call["id"],
            "server": tool.server.label if tool is not None else None,
            "name": tool.info.name if tool is not None else name,
            "arguments": arguments if isinstance(arguments, str) and arguments else "{}",
            "output": None,
            "error": None,
            "error_kind": None,
            "status": "in_progress",
            "approval_request_id": approval_request_id,
        }

    async def _execute(
        self, record: dict[str, Any], call: dict[str, Any], template: dict[str, Any]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        yield [{**template, "choices": [], "mcp_call": dict(record)}]
        tool = self.tools.tools.get(call["function"]["name"])
        outcome = await run_call(
            tool.server.caller if tool is not None else None,
            record["name"],
            record["arguments"],
            self._timeout,
            shown_as=record["name"],
            offered=[*self.tools.tools, *self.tools.client_tools],
        )
        record["output"], record["error"], record["error_kind"] = outcome.output, outcome.error, outcome.error_kind
        record["status"] = "failed" if record["error"] is not None else "completed"
        yield [{**template, "choices": [], "mcp_call": dict(record)}]

    def _list_chunk(self, server: HostedServer) -> dict[str, Any]:
        tools = [
            {
                "name": info.name,
                "description": info.description,
                "input_schema": info.input_schema,
                "annotations": server.annotations.get(info.name),
            }
            for info in server.tools
        ]
        return {
            "object": "chat.completion.chunk",
            "choices": [],
            "mcp_list_tools": {"server_label": server.label, "tools": tools},
        }

    def _tail(
        self,
        turn: _Turn,
        theirs: list[dict[str, Any]],
        made_mcp_calls: bool,
        usage: dict[str, Any] | None,
        template: dict[str, Any],
    ) -> list[dict[str, Any]]:
        tail: list[dict[str, Any]] = []
        if theirs:
            tail.append(calls_chunk(template, theirs))
        finish = turn.finish or {**template, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if made_mcp_calls and not theirs:
            finish["choices"][0]["finish_reason"] = "stop"
        tail.append(finish)
        if usage is not None:
            tail.append({**template, "choices": [], "usage": usage})
        return tail
