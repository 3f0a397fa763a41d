"""The Responses ``mcp`` tool's request side without a server: its fields checked with 400s naming them, the
``require_approval`` and ``allowed_tools`` filters as OpenAI defines them, and MCP input items in the translation."""

from __future__ import annotations

import pytest

from xinference.api.openai.responses.mcp import parse_mcp_tool
from xinference.api.openai.responses.protocol import ResponsesRequest
from xinference.api.openai.responses.translate import responses_to_chat
from xinference.errors import InvalidRequest, UnsupportedOption

URL = "http://127.0.0.1:8000/mcp"


def tool(**fields: object) -> dict[str, object]:
    return {"type": "mcp", "server_label": "tools", "server_url": URL, **fields}


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"server_label": "bad label"}, "tools[0].server_label"),
        ({"server_url": "ftp://x"}, "tools[0].server_url"),
        ({"headers": {"a": 1}}, "tools[0].headers"),
        ({"allowed_tools": "whoami"}, "tools[0].allowed_tools"),
        ({"allowed_tools": {"tool_names": ["a"], "other": 1}}, "tools[0].allowed_tools.other"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval"),
        ({"require_approval": {"always": {"read_only": "yes"}}}, "tools[0].require_approval.always.read_only"),
        ({"surprise": 1}, "tools[0].surprise"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_mcp_tool(tool(**fields), "tools[0]")
    assert caught.value.param == param


def test_openai_only_fields_are_unsupported() -> None:
    with pytest.raises(UnsupportedOption) as caught:
        parse_mcp_tool({"type": "mcp", "server_label": "g", "connector_id": "connector_gmail"}, "tools[1]")
    assert caught.value.param == "tools[1].connector_id"


def test_approval_and_allowed_filters() -> None:
    assert parse_mcp_tool(tool(), "t").needs_approval("x", read_only=True)  # "always" by default
    assert not parse_mcp_tool(tool(require_approval="never"), "t").needs_approval("x", read_only=False)
    mixed = parse_mcp_tool(
        tool(require_approval={"never": {"tool_names": ["whoami"]}, "always": {"read_only": False}}), "t"
    )
    assert not mixed.needs_approval("whoami", read_only=True)
    assert mixed.needs_approval("delete", read_only=False)
    assert mixed.needs_approval("unnamed", read_only=True)  # no filter names it: approval, as OpenAI does
    allowed = parse_mcp_tool(tool(allowed_tools={"read_only": True}), "t").allowed
    assert allowed is not None and allowed.matches("x", read_only=True) and not allowed.matches("x", read_only=False)


def translate(**fields: object) -> object:
    return responses_to_chat(ResponsesRequest.model_validate({"model": "m", "input": "hi", **fields}), [])


def test_mcp_tools_beside_function_tools_and_an_mcp_tool_choice() -> None:
    function = {"type": "function", "name": "local", "parameters": {"type": "object", "properties": {}}}
    chat = translate(tools=[tool(), function], tool_choice={"type": "mcp", "server_label": "tools", "name": "whoami"})
    assert [spec.label for spec in chat.mcp.specs] == ["tools"]  # type: ignore[attr-defined]
    assert [t["function"]["name"] for t in chat.params["tools"]] == ["local"]  # type: ignore[attr-defined]
    assert chat.mcp.choice == {"type": "mcp", "server_label": "tools", "name": "whoami"}  # type: ignore[attr-defined]
    assert chat.params["stream"] is True  # type: ignore[attr-defined]  # MCP turns run as streams
    with pytest.raises(InvalidRequest) as caught:
        translate(tools=[tool()], tool_choice={"type": "mcp", "server_label": "other"})
    assert caught.value.param == "tool_choice.server_label"
    with pytest.raises(InvalidRequest) as twice:
        translate(tools=[tool(), tool()])
    assert twice.value.param == "tools[1].server_label"


def test_mcp_input_items() -> None:
    items = [
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "tools", "tools": []},
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "tools",
            "name": "whoami",
            "arguments": "{}",
            "output": "42",
        },
        {"role": "user", "content": "and again?"},
    ]
    chat = translate(input=items, tools=[tool()])
    assert chat.mcp.listed == {"tools"}  # type: ignore[attr-defined]
    messages = chat.params["messages"]  # type: ignore[attr-defined]
    assert messages[0]["tool_calls"][0]["function"] == {"name": "whoami", "arguments": "{}"}
    assert messages[1] == {"role": "tool", "tool_call_id": "mcp_1", "content": "42"}
    with pytest.raises(InvalidRequest) as caught:
        translate(
            input=[{"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}], tools=[tool()]
        )
    assert caught.value.param == "previous_response_id"
