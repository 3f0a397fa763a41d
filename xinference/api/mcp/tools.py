"""MCP tools as a model sees them, and running one call: the pieces every tool loop shares.

Two loops use them: :mod:`xinference.api.mcp.loop` (the operator's servers in chat completions) and
``xinference.api.openai.chat.hosted_mcp`` (servers a Responses or Anthropic request names, with approvals). Both offer
each server's tools under the tool's own name, or ``server__tool`` when another offered tool (of another server or of
the client) has that name; both answer a failed call to the model with its error (doc/mcp.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from xinference.api.mcp.manager import ToolInfo, ToolResult
from xinference.errors import McpError

__all__ = [
    "CallOutcome",
    "ToolCaller",
    "add_call_delta",
    "add_usage",
    "chat_tool",
    "calls_chunk",
    "client_tool_names",
    "expose_names",
    "later_choice",
    "run_call",
    "safe_name",
    "tool_message",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ToolCaller(Protocol):
    """What runs a server's tools: a configured server of the hub or a request's own session (``RemoteSession``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult: ...


def safe_name(name: str) -> str:
    """``name`` with the characters a tool name may not have replaced by ``_``, at most 128 characters."""
    return _UNSAFE.sub("_", name)[:128] or "tool"


def client_tool_names(client_tools: list[dict[str, Any]] | None) -> frozenset[str]:
    """The function names of the client's own chat tools."""
    names = (_function_name(tool) for tool in client_tools or [])
    return frozenset(name for name in names if name)


def _function_name(tool: dict[str, Any]) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def expose_names(
    servers: Sequence[tuple[str, Sequence[ToolInfo]]], client: frozenset[str]
) -> Iterator[tuple[str, int, ToolInfo]]:
    """Name every server's tools for the model, as ``(exposed name, index of the server, tool)``: a name offered once
    is kept; a name two servers share, or one the client's tools use, becomes ``server__tool``."""
    counts: dict[str, int] = {}
    for _, infos in servers:
        for info in infos:
            counts[safe_name(info.name)] = counts.get(safe_name(info.name), 0) + 1
    for index, (server, infos) in enumerate(servers):
        for info in infos:
            name = safe_name(info.name)
            if counts[name] > 1 or name in client:
                name = f"{safe_name(server)}__{name}"[:128]
            yield name, index, info


def chat_tool(exposed: str, info: ToolInfo) -> dict[str, Any]:
    """The chat ``tools`` entry offering ``info`` under the name ``exposed``."""
    function: dict[str, Any] = {"name": exposed, "parameters": info.input_schema or {"type": "object"}}
    if info.description:
        function["description"] = info.description
    return {"type": "function", "function": function}


def later_choice(choice: Any) -> Any:
    """The tool_choice of the turns after the first: a forced call was made, so the model may now answer."""
    if choice == "required" or isinstance(choice, dict):
        return "auto"
    return choice


def add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """The token counts of the turns so far with one more turn's added."""
    if not usage:
        return total
    if total is None:
        return dict(usage)
    merged = dict(total)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        merged[key] = int(total.get(key) or 0) + int(usage.get(key) or 0)
    return merged


@dataclass(frozen=True)
class CallOutcome:
    """How one call ended: its ``output``, or its ``error`` and whose it is (``protocol``: the call could not be made
    or answered; ``tool``: the tool reported an error)."""

    output: str | None = None
    error: str | None = None
    error_kind: Literal["protocol", "tool"] | None = None


async def run_call(
    caller: ToolCaller | None,
    tool: str,
    arguments: str,
    timeout: float | None,
    *,
    shown_as: str,
    offered: Iterable[str],
) -> CallOutcome:
    """Run tool ``tool`` with ``arguments`` (JSON text; empty means ``{}``); never raises for the tool's sake.
    ``caller`` None means the model called a name that is no tool: the error lists ``offered``. ``shown_as`` names
    the tool in the errors."""
    if caller is None:
        listed = ", ".join(sorted(offered)) or "none"
        return CallOutcome(error=f"no tool named {shown_as!r}; the tools are: {listed}", error_kind="protocol")
    try:
        parsed = json.loads(arguments or "{}")
        if not isinstance(parsed, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        return CallOutcome(error=f"invalid arguments for {shown_as!r}: {exc}", error_kind="protocol")
    try:
        result = await caller.call_tool(tool, parsed, timeout)
    except McpError as exc:
        return CallOutcome(error=exc.message, error_kind="protocol")
    if result.is_error:
        return CallOutcome(error=result.output or "the tool reported an error", error_kind="tool")
    return CallOutcome(output=result.output)


def tool_message(record: dict[str, Any]) -> dict[str, Any]:
    """The ``tool`` message that answers a call record to the model: its output, or its error."""
    content = record["output"] if record["error"] is None else f"Error: {record['error']}"
    return {"role": "tool", "tool_call_id": record["id"], "content": content or ""}


# -- streamed tool calls ----------------------------------------------------------------------------------------------
def add_call_delta(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    """Add one streamed ``tool_calls`` delta to the calls of a turn so far, by index (name and arguments come in
    pieces)."""
    empty = {"type": "function", "function": {"name": "", "arguments": ""}}
    slot = calls.setdefault(int(delta.get("index") or 0), empty)
    if delta.get("id"):
        slot["id"] = delta["id"]
    function = delta.get("function") or {}
    slot["function"]["name"] += function.get("name") or ""
    slot["function"]["arguments"] += function.get("arguments") or ""


def calls_chunk(template: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One chunk passing the whole ``calls`` (the client's own, which the client runs) on in a stream."""
    deltas = [
        {"index": n, "id": call.get("id"), "type": "function", "function": dict(call["function"])}
        for n, call in enumerate(calls)
    ]
    return {**template, "choices": [{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": None}]}
