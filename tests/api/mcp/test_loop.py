"""The tool loop against the real tool server (over stdio, through the hub), with a scripted model.

``ScriptedModel`` is a test double for the model only: it answers each turn with the next prepared assistant message
and records what it was sent, so each rule of the loop (forced choice only first, unknown tools, the round limit,
errors fed back, the client's own calls) is checked exactly. The real model's part is in test_chat_mcp.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from tests.api.mcp.servers import stdio_entry
from xinference.api.mcp.config import parse_config
from xinference.api.mcp.loop import HubServer, ToolSet, run_tool_loop, stream_tool_loop
from xinference.api.mcp.manager import McpHub, ToolInfo


def call(name: str, arguments: Any, call_id: str = "") -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id or f"call_{name}", "type": "function", "function": {"name": name, "arguments": text}}


class ScriptedModel:
    """Stands in for the model: each turn answers the next of ``replies`` (content, tool calls)."""

    def __init__(self, *replies: tuple[str, list[dict[str, Any]]]) -> None:
        self.replies = list(replies)
        self.turns: list[tuple[list[dict[str, Any]], Any]] = []

    def _next(self, messages: list[dict[str, Any]], tool_choice: Any) -> tuple[str, list[dict[str, Any]]]:
        self.turns.append((list(messages), tool_choice))
        return self.replies[min(len(self.turns), len(self.replies)) - 1]

    async def complete(self, messages: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any]:
        content, calls = self._next(messages, tool_choice)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{len(self.turns)}",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    async def open(self, messages: list[dict[str, Any]], tool_choice: Any) -> AsyncIterator[list[dict[str, Any]]]:
        content, calls = self._next(messages, tool_choice)
        head = {"id": f"chatcmpl-{len(self.turns)}", "object": "chat.completion.chunk", "created": 1, "model": "m"}

        async def chunks() -> AsyncIterator[list[dict[str, Any]]]:
            yield [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
            for word in content.split(" ") if content else []:
                yield [{**head, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}]
            for n, c in enumerate(calls):
                delta = {"tool_calls": [{"index": n, "id": c["id"], "function": {"name": c["function"]["name"]}}]}
                yield [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
                args = c["function"]["arguments"]
                for part in (args[: len(args) // 2], args[len(args) // 2 :]):
                    delta = {"tool_calls": [{"index": n, "function": {"arguments": part}}]}
                    yield [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
            finish = "tool_calls" if calls else "stop"
            yield [
                {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                {**head, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}},
            ]

        return chunks()


USER = [{"role": "user", "content": "What is the capital of France?"}]


def with_tools(tmp_path: Path, body: Callable[[McpHub, ToolSet], Awaitable[None]], client: Any = None) -> None:
    async def main() -> None:
        hub = McpHub(parse_config({"mcpServers": {"tools": stdio_entry()}}), logs_dir=tmp_path)
        await hub.start()
        try:
            tools = ToolSet.build([("tools", HubServer(hub, "tools"), await hub.list_tools("tools"))], client)
            await body(hub, tools)
        finally:
            await hub.stop()

    asyncio.run(main())


def test_forced_call_runs_then_the_model_answers(tmp_path: Path) -> None:
    model = ScriptedModel(("", [call("lookup_capital", {"country": "France"})]), ("It is Paris.", []))
    forced = {"type": "function", "function": {"name": "lookup_capital"}}

    async def body(hub: McpHub, tools: ToolSet) -> None:
        result = await run_tool_loop(model.complete, USER, tools, forced, max_rounds=8, timeout=10)
        assert result["choices"][0]["message"]["content"] == "It is Paris."
        assert result["mcp_calls"] == [
            {
                "id": "call_lookup_capital",
                "server": "tools",
                "name": "lookup_capital",
                "arguments": '{"country": "France"}',
                "output": "Paris",
                "error": None,
                "status": "completed",
            }
        ]
        assert result["usage"] == {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}
        (first, first_choice), (second, second_choice) = model.turns
        assert first == USER and first_choice == forced
        assert second_choice == "auto"  # forced once: the model may answer after the call
        assert second[1]["tool_calls"][0]["function"]["name"] == "lookup_capital"
        assert second[2] == {"role": "tool", "tool_call_id": "call_lookup_capital", "content": "Paris"}

    with_tools(tmp_path, body)


def test_unknown_tool_bad_arguments_tool_error_and_timeout_are_fed_back(tmp_path: Path) -> None:
    model = ScriptedModel(
        (
            "",
            [
                call("no_such_tool", {}),
                call("add", "{not json"),
                call("fail", {"reason": "out of paper"}),
                call("slow", {"seconds": 5}),
            ],
        ),
        ("Sorry, the tools failed.", []),
    )

    async def body(hub: McpHub, tools: ToolSet) -> None:
        result = await run_tool_loop(model.complete, USER, tools, None, max_rounds=8, timeout=1)
        calls = result["mcp_calls"]
        assert [c["status"] for c in calls] == ["failed"] * 4
        assert calls[0]["server"] is None and "no tool named 'no_such_tool'" in calls[0]["error"]
        assert "lookup_capital" in calls[0]["error"]  # the model is told which tools exist
        assert "invalid arguments for 'add'" in calls[1]["error"]
        assert calls[2]["server"] == "tools" and calls[2]["error"]
        assert "did not answer within 1s" in calls[3]["error"]
        fed = model.turns[1][0][2:]
        assert [m["role"] for m in fed] == ["tool"] * 4
        assert all(m["content"].startswith("Error: ") for m in fed)
        assert result["choices"][0]["message"]["content"] == "Sorry, the tools failed."

    with_tools(tmp_path, body)


def test_more_rounds_than_allowed(tmp_path: Path) -> None:
    model = ScriptedModel(("", [call("add", {"a": 1, "b": 1})]))  # calls add forever

    async def body(hub: McpHub, tools: ToolSet) -> None:
        result = await run_tool_loop(model.complete, USER, tools, "required", max_rounds=2, timeout=10)
        assert len(result["mcp_calls"]) == 2
        assert [choice for _, choice in model.turns] == ["required", "auto", "none"]
        choice = result["choices"][0]
        assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"

    with_tools(tmp_path, body)


def test_client_tools_come_back_to_the_client_and_names_clash(tmp_path: Path) -> None:
    client_tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    model = ScriptedModel(("", [call("tools__add", {"a": 2, "b": 2}), call("add", {"a": 9})]))

    async def body(hub: McpHub, tools: ToolSet) -> None:
        assert "tools__add" in tools.tools and "add" not in tools.tools  # the client's 'add' keeps its name
        assert "lookup_capital" in tools.tools
        result = await run_tool_loop(model.complete, USER, tools, None, max_rounds=8, timeout=10)
        assert len(model.turns) == 1
        assert result["mcp_calls"][0]["name"] == "add" and result["mcp_calls"][0]["output"] == "4"
        choice = result["choices"][0]
        assert [c["function"]["name"] for c in choice["message"]["tool_calls"]] == ["add"]
        assert choice["finish_reason"] == "tool_calls"

    with_tools(tmp_path, body, client=[client_tool])


def test_a_server_that_is_down_is_an_error_for_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(("", [call("search", {"q": "x"})]), ("No search today.", []))

    async def body(hub: McpHub, tools: ToolSet) -> None:
        await hub.add("gone", {"url": "http://127.0.0.1:9/mcp"}, from_request=False)
        info = ToolInfo("search", "Search.", {"type": "object"})
        down = ToolSet.build([("gone", HubServer(hub, "gone"), [info])])
        result = await run_tool_loop(model.complete, USER, down, None, max_rounds=8, timeout=5)
        assert result["mcp_calls"][0]["status"] == "failed"
        assert "MCP server 'gone' is" in result["mcp_calls"][0]["error"]
        assert result["choices"][0]["message"]["content"] == "No search today."

    with_tools(tmp_path, body)


def test_stream_reports_each_call_as_it_starts_and_ends(tmp_path: Path) -> None:
    model = ScriptedModel(("", [call("lookup_capital", {"country": "Japan"})]), ("The capital is Tokyo.", []))

    async def body(hub: McpHub, tools: ToolSet) -> None:
        chunks = [c async for batch in stream_tool_loop(model.open, USER, tools, "required", 8, 10) for c in batch]
        calls = [c["mcp_call"] for c in chunks if "mcp_call" in c]
        assert [c["status"] for c in calls] == ["in_progress", "completed"]
        assert calls[1]["output"] == "Tokyo" and calls[1]["arguments"] == '{"country": "Japan"}'
        assert all(c["choices"] == [] for c in chunks if "mcp_call" in c)
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices"))
        assert text == "ThecapitalisTokyo."
        assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c.get("choices"))
        assert {c["id"] for c in chunks} == {"chatcmpl-1"}  # one stream id over both turns
        roles = [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("role")]
        assert len(roles) == 1
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["usage"]["total_tokens"] == 24
        assert model.turns[1][1] == "auto"

    with_tools(tmp_path, body)


def test_stream_returns_client_calls_whole(tmp_path: Path) -> None:
    client_tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    model = ScriptedModel(("", [call("weather", {"city": "Lima"})]))

    async def body(hub: McpHub, tools: ToolSet) -> None:
        chunks = [c async for batch in stream_tool_loop(model.open, USER, tools, None, 8, 10) for c in batch]
        assert not any("mcp_call" in c for c in chunks)
        deltas = [
            c["choices"][0]["delta"]["tool_calls"]
            for c in chunks
            if c.get("choices") and "tool_calls" in c["choices"][0]["delta"]
        ]
        assert deltas == [
            [
                {
                    "index": 0,
                    "id": "call_weather",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Lima"}'},
                }
            ]
        ]
        assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"

    with_tools(tmp_path, body, client=[client_tool])


@pytest.mark.parametrize("name", ["a.b/c", "x" * 200])
def test_tool_names_are_made_safe(name: str) -> None:
    info = ToolInfo(name, None, {"type": "object"})
    tools = ToolSet.build([("s", HubServer(None, "s"), [info])])  # type: ignore[arg-type]
    (exposed,) = tools.tools
    assert len(exposed) <= 128 and all(ch.isalnum() or ch in "_-" for ch in exposed)
