"""The Anthropic Messages translation without a server: requests into chat parameters, chat results and chunks into
messages and stream events. The stream is replayed through the anthropic SDK's own accumulator, so an event out of
the order the SDK expects fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from pydantic import ValidationError

from xinference.api.anthropic.protocol import CountTokensRequest, MessagesRequest
from xinference.api.anthropic.stream import MessageStream, message_from_chat
from xinference.errors import EngineError, InvalidRequest, UnsupportedOption

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _request(**fields: Any) -> MessagesRequest:
    base: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
    return MessagesRequest.model_validate({**base, **fields})


def test_plain_request_becomes_chat_params() -> None:
    params = (
        _request(
            system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
            stop_sequences=["END"],
            temperature=0.5,
            top_p=0.9,
            top_k=40,
            metadata={"user_id": "u1"},
        )
        .to_chat()
        .params
    )
    assert params["messages"] == [
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "Hi"},
    ]
    assert params["max_tokens"] == 64 and params["stop"] == ["END"]
    assert params["temperature"] == 0.5 and params["top_p"] == 0.9 and params["top_k"] == 40
    assert "tools" not in params and "stream_options" not in params


def test_stream_asks_for_usage() -> None:
    params = _request(stream=True).to_chat().params
    assert params["stream"] is True and params["stream_options"] == {"include_usage": True}


def test_tool_round_trip_translation() -> None:
    chat = _request(
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 16},
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig"},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Sunny"}]},
                    {"type": "text", "text": "And now?"},
                ],
            },
        ],
    ).to_chat()
    params = chat.params
    assert params["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    assert params["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert params["parallel_tool_calls"] is False
    assert params["chat_template_kwargs"] == {"enable_thinking": True}
    user, assistant, tool, follow_up = params["messages"]
    assert user == {"role": "user", "content": "Weather in Paris?"}
    assert assistant["content"] == "Let me check." and assistant["reasoning_content"] == "I should call the tool."
    assert assistant["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
        }
    ]
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"}
    assert follow_up == {"role": "user", "content": "And now?"}
    assert chat.image_params == []


@pytest.mark.parametrize(
    "choice,expected",
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
    ],
)
def test_tool_choice_kinds(choice: dict[str, Any], expected: str) -> None:
    assert _request(tools=[WEATHER], tool_choice=choice).to_chat().params["tool_choice"] == expected


def test_thinking_disabled_and_images_located() -> None:
    chat = _request(
        thinking={"type": "disabled"},
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                ],
            }
        ],
    ).to_chat()
    assert chat.params["chat_template_kwargs"] == {"enable_thinking": False}
    assert chat.image_params == ["messages[0].content[1]"]
    assert chat.params["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBOR"},
    }


def test_count_tokens_request_needs_no_max_tokens() -> None:
    params = (
        CountTokensRequest.model_validate(
            {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER]}
        )
        .to_chat()
        .params
    )
    assert params["tools"][0]["function"]["name"] == "get_weather" and "max_tokens" not in params


def test_output_config_becomes_json_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    params = _request(output_config={"format": {"type": "json_schema", "schema": schema}}).to_chat().params
    assert params["response_format"]["type"] == "json_schema"
    assert params["response_format"]["json_schema"]["schema"] == schema


MALFORMED: list[tuple[dict[str, Any], str]] = [
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    (
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]},
        "messages[0].content[0].tool_use_id",
    ),
    ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": []}]}, "messages[0]"),
    (
        {
            "messages": [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
                },
                {"role": "user", "content": "no result"},
            ]
        },
        "messages[1].content[0]",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": "Paris"}],
                },
            ]
        },
        "messages[1].content[0]",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
        "messages[0].content[0].source.type",
    ),
    ({"tools": [{"name": "bad name", "input_schema": {"type": "object"}}]}, "tools[0].name"),
    ({"tools": [{"name": "t"}]}, "tools[0].input_schema"),
    ({"tools": [{"name": "t", "input_schema": {"type": "string"}}]}, "tools[0].input_schema"),
    (
        {"tools": [{"name": "t", "input_schema": {"type": "object", "properties": {"a": {"type": "text"}}}}]},
        "tools[0].input_schema.properties.a.type",
    ),
    ({"tools": [{"name": "t", "input_schema": {"type": "object", "required": "a"}}]}, "tools[0].input_schema.required"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].name"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "other"}}, "tool_choice.name"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 64}}, "thinking.budget_tokens"),
    ({"system": [{"type": "image", "source": {}}]}, "system[0]"),
]


@pytest.mark.parametrize("fields,param", MALFORMED)
def test_malformed_requests_name_the_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises((InvalidRequest, ValidationError)) as caught:
        _request(**fields).to_chat()
    if isinstance(caught.value, InvalidRequest):
        assert caught.value.param == param, caught.value.message
        assert caught.value.status_code == 400
    else:
        assert param in {".".join(str(p) for p in e["loc"]) for e in caught.value.errors()}


def test_server_blocks_are_unsupported_not_invalid() -> None:
    with pytest.raises(UnsupportedOption):
        _request(messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}]).to_chat()


# -- responses ------------------------------------------------------------------------------------------------------
def _chat_result(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def test_message_from_chat_orders_blocks_and_maps_stop_reason() -> None:
    result = _chat_result(
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "Hmm.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        "tool_calls",
    )
    message = message_from_chat(result, "m")
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][2] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {"input_tokens": 11, "output_tokens": 7}
    assert message_from_chat(_chat_result({"content": "x"}, "length"), "m")["stop_reason"] == "max_tokens"
    assert message_from_chat(_chat_result({"content": "x"}), "m")["stop_reason"] == "end_turn"


def test_tool_arguments_that_are_not_an_object_are_an_engine_error() -> None:
    bad = _chat_result({"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1"}}]}, "tool_calls")
    with pytest.raises(EngineError):
        message_from_chat(bad, "m")
    cut = message_from_chat({**bad, "choices": [{**bad["choices"][0], "finish_reason": "length"}]}, "m")
    assert cut["stop_reason"] == "max_tokens" and cut["content"][0]["input"] == {}


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "object": "chat.completion.chunk",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        chunk["usage"] = usage
    return chunk


def _replay(chunks: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    stream = MessageStream("m")
    events = stream.start()
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.finish()
    snapshot, buffers = None, {}
    for name, payload in events:
        assert name == payload["type"]
        if name != "ping":
            snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs=buffers)  # type: ignore[arg-type]
    return events, snapshot


def test_stream_event_sequence_with_thinking_text_and_two_tool_calls() -> None:
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"reasoning_content": "Need "}),
        _chunk({"reasoning_content": "weather."}),
        _chunk({"content": "Let me "}),
        _chunk({"content": "check."}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    }
                ]
            }
        ),
        _chunk({}, "tool_calls"),
        _chunk(None, usage={"prompt_tokens": 30, "completion_tokens": 12}),
    ]
    events, message = _replay(chunks)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [p["content_block"]["type"] for n, p in events if n == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    # every block is closed before the next one opens, with consecutive indices
    opened: list[int] = []
    for name, payload in events:
        if name == "content_block_start":
            assert not opened and payload["index"] == len(
                [n for n, _ in events[: events.index((name, payload))] if n == "content_block_stop"]
            )
            opened.append(payload["index"])
        elif name == "content_block_stop":
            assert opened.pop() == payload["index"]
    assert message.content[0].thinking == "Need weather."
    assert message.content[1].text == "Let me check."
    assert message.content[2].id == "call_a" and message.content[2].input == {"city": "Paris"}
    assert message.content[3].input == {"city": "Rome"}
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 30 and message.usage.output_tokens == 12


def test_stream_of_text_only_ends_with_end_turn() -> None:
    events, message = _replay(
        [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Paris."}), _chunk({}, "stop")]
    )
    assert [n for n, _ in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert message.content[0].text == "Paris." and message.stop_reason == "end_turn"


def test_interleaved_tool_call_arguments_are_refused() -> None:
    stream = MessageStream("m")
    stream.start()
    stream.feed(_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}}]}))
    stream.feed(_chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "f", "arguments": "{"}}]}))
    with pytest.raises(EngineError):
        stream.feed(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}))
