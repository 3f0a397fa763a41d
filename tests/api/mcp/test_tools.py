"""The pieces both MCP tool loops share (``xinference.api.mcp.tools``): naming tools for the model, running one call,
and gathering streamed call deltas. The loops themselves are tested in test_loop.py (the operator's servers) and
tests/api/openai/responses, tests/api/anthropic (servers a request names)."""

from __future__ import annotations

import asyncio
from typing import Any

from xinference.api.mcp.manager import ToolInfo, ToolResult
from xinference.api.mcp.tools import add_call_delta, calls_chunk, client_tool_names, expose_names, run_call
from xinference.errors import McpError


def info(name: str) -> ToolInfo:
    return ToolInfo(name, None, {"type": "object"})


def test_names_clash_across_servers_and_with_the_client() -> None:
    client = client_tool_names([{"type": "function", "function": {"name": "lookup"}}, {"type": "web_search"}])
    assert client == frozenset({"lookup"})
    servers = [("a", [info("echo"), info("add")]), ("b.x", [info("echo"), info("lookup"), info("my tool")])]
    named = [(name, index, tool.name) for name, index, tool in expose_names(servers, client)]
    assert named == [
        ("a__echo", 0, "echo"),
        ("add", 0, "add"),
        ("b_x__echo", 1, "echo"),  # the server's part is made safe too
        ("b_x__lookup", 1, "lookup"),
        ("my_tool", 1, "my tool"),
    ]


class RecordingCaller:
    """Test double for a server: answers each call with ``answer`` (or raises it) and records the calls."""

    def __init__(self, answer: ToolResult | McpError) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
        self.calls.append((name, arguments))
        if isinstance(self.answer, McpError):
            raise self.answer
        return self.answer


def test_a_call_ends_in_output_or_an_error_of_its_kind() -> None:
    ok = RecordingCaller(ToolResult("3"))
    outcome = asyncio.run(run_call(ok, "add", '{"a": 1}', None, shown_as="s__add", offered=[]))
    assert (outcome.output, outcome.error, outcome.error_kind) == ("3", None, None)
    assert ok.calls == [("add", {"a": 1})]
    assert asyncio.run(run_call(ok, "add", "", None, shown_as="add", offered=[])).output == "3"  # empty is {}
    assert ok.calls[-1] == ("add", {})

    unknown = asyncio.run(run_call(None, "nope", "{}", None, shown_as="nope", offered=["b", "a"]))
    assert (unknown.error, unknown.error_kind) == ("no tool named 'nope'; the tools are: a, b", "protocol")
    bad = asyncio.run(run_call(ok, "add", "[1]", None, shown_as="s__add", offered=[]))
    assert bad.error == "invalid arguments for 's__add': the arguments must be a JSON object"
    assert len(ok.calls) == 2  # not called with bad arguments

    refused = RecordingCaller(ToolResult("", is_error=True))
    failed = asyncio.run(run_call(refused, "t", "{}", None, shown_as="t", offered=[]))
    assert (failed.error, failed.error_kind) == ("the tool reported an error", "tool")
    down = asyncio.run(run_call(RecordingCaller(McpError("server down")), "t", "{}", None, shown_as="t", offered=[]))
    assert (down.output, down.error, down.error_kind) == (None, "server down", "protocol")


def test_streamed_call_deltas_add_up_by_index() -> None:
    calls: dict[int, dict[str, Any]] = {}
    add_call_delta(calls, {"index": 0, "id": "c0", "function": {"name": "ad", "arguments": '{"a"'}})
    add_call_delta(calls, {"index": None, "function": {"name": "d", "arguments": ": 1}"}})
    add_call_delta(calls, {"index": 1, "id": "c1", "function": {"name": "echo"}})
    assert calls[0] == {"type": "function", "id": "c0", "function": {"name": "add", "arguments": '{"a": 1}'}}
    chunk = calls_chunk({"id": "x"}, [calls[i] for i in sorted(calls)])
    deltas = chunk["choices"][0]["delta"]["tool_calls"]
    assert chunk["id"] == "x" and [(d["index"], d["id"], d["function"]["name"]) for d in deltas] == [
        (0, "c0", "add"),
        (1, "c1", "echo"),
    ]
