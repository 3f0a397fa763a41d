"""The chat post-processor engines apply: whole responses and chunk streams give the same message."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.model.parsers.test_parsers import chunked
from xinference.model.parsers.postprocess import ChatOutputParser
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
QWEN3_OUTPUT = (
    '<think>\nI need the weather.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", '
    '"arguments": {"city": "Paris"}}\n</tool_call>'
)


def response(text: str, finish: str = "stop") -> dict:
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
    }


def chunks(pieces: list[str], finish: str = "stop") -> list[dict]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    out += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return out


def assemble(stream_chunks: list[dict]) -> dict:
    message: dict = {"content": "", "reasoning_content": "", "tool_calls": []}
    finish = None
    for chunk in stream_chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            message["reasoning_content"] += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:
                    message["tool_calls"].append({"id": call["id"], "name": call["function"]["name"], "arguments": ""})
                message["tool_calls"][call["index"]]["arguments"] += call["function"]["arguments"]
            finish = choice["finish_reason"] or finish
    return {"message": message, "finish_reason": finish}


def qwen3_parser(**request) -> ChatOutputParser:
    parser = ChatOutputParser.for_request(ModelRegistry().get("qwen3"), {"tools": TOOLS, **request})
    assert parser is not None
    return parser


def test_whole_response() -> None:
    fixed = qwen3_parser().fix_response(response(QWEN3_OUTPUT))
    choice = fixed["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["reasoning_content"] == "I need the weather." and message["content"] == "Let me check.\n"
    [call] = message["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=40))
def test_stream_matches_whole(cuts: list[int]) -> None:
    rewriter = qwen3_parser().stream()
    out = [c for chunk in chunks(chunked(QWEN3_OUTPUT, cuts)) for c in rewriter.process(chunk)]
    assert out[0]["choices"][0]["delta"]["role"] == "assistant"
    got = assemble(out)
    assert got["finish_reason"] == "tool_calls"
    assert got["message"]["reasoning_content"] == "I need the weather.\n"
    assert got["message"]["content"] == "Let me check.\n"
    [call] = got["message"]["tool_calls"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert sum(1 for c in out if c["choices"][0]["finish_reason"]) == 1


def test_no_tools_or_tool_choice_none_leaves_calls_as_text_and_length_stays() -> None:
    family = ModelRegistry().get("qwen2.5-instruct")
    assert ChatOutputParser.for_request(family, {}) is None
    assert ChatOutputParser.for_request(family, {"tools": TOOLS, "tool_choice": "none"}) is None
    parser = ChatOutputParser.for_request(family, {"tools": TOOLS})
    cut = parser.fix_response(response('<tool_call>\n{"name": "get_weather", "arguments": {"ci', "length"))
    assert cut["choices"][0]["finish_reason"] == "length"


def test_thinking_off_leaks_no_tag() -> None:
    parser = qwen3_parser(chat_template_kwargs={"enable_thinking": False})
    text = "<think>\n\n</think>\n\nHello!"
    assert parser.fix_response(response(text))["choices"][0]["message"]["content"] == "Hello!"
    rewriter = parser.stream()
    out = [c for chunk in chunks(list(text)) for c in rewriter.process(chunk)]
    assert assemble(out)["message"]["content"] == "Hello!"
    rewriter = qwen3_parser(enable_thinking=False).stream()
    streamed = [c for chunk in chunks(list(text)) for c in rewriter.process(chunk)]
    assert "<think>" not in json.dumps(streamed) and assemble(streamed)["message"]["reasoning_content"] == ""


def test_native_fields_are_kept() -> None:
    parser = qwen3_parser()
    native = response("Final answer.")
    native["choices"][0]["message"]["reasoning_content"] = "engine-made"
    fixed = parser.fix_response(native)["choices"][0]["message"]
    assert fixed == {"role": "assistant", "content": "Final answer.", "reasoning_content": "engine-made"}


def test_parallel_tool_calls_false_keeps_the_first_call() -> None:
    family = ModelRegistry().get("qwen2.5-instruct")
    two = (
        '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'
    )
    both = ChatOutputParser.for_request(family, {"tools": TOOLS}).fix_response(response(two))
    assert [c["function"]["name"] for c in both["choices"][0]["message"]["tool_calls"]] == ["a", "b"]
    parser = ChatOutputParser.for_request(family, {"tools": TOOLS, "parallel_tool_calls": False})
    one = parser.fix_response(response(two))
    assert [c["function"]["name"] for c in one["choices"][0]["message"]["tool_calls"]] == ["a"]
    rewriter = parser.stream()
    streamed = assemble([c for chunk in chunks([two[:50], two[50:]]) for c in rewriter.process(chunk)])
    assert [c["name"] for c in streamed["message"]["tool_calls"]] == ["a"]


def test_usage_rides_on_the_last_chunk_only() -> None:
    rewriter = qwen3_parser().stream()
    last = chunks(["<think>x</think>Hel"])[-1]
    body = {
        **last,
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}],
    }
    rewriter.process(chunks(["<think>x</think>Hel"])[1])
    out = rewriter.process(body)
    assert [("usage" in c) for c in out] == [False] * (len(out) - 1) + [True]
    assert out[-1]["choices"][0]["finish_reason"] == "stop"


def test_engine_reasoning_midway_releases_what_was_held() -> None:
    parser = ChatOutputParser.for_request(ModelRegistry().get("qwen3"), {})
    rewriter = parser.stream()
    base = chunks([])[0]
    held = rewriter.process({**base, "choices": [{"index": 0, "delta": {"content": "Sure"}, "finish_reason": None}]})
    assert held == []  # no tag yet: it might be reasoning whose opening tag the template wrote
    out = rewriter.process(
        {**base, "choices": [{"index": 0, "delta": {"reasoning_content": "why"}, "finish_reason": None}]}
    )
    deltas = [c["choices"][0]["delta"] for c in out]
    assert {"content": "Sure"} in deltas and any(d.get("reasoning_content") == "why" for d in deltas)


# GLM-4.5 with thinking on: reasoning, a sentence, two XML calls (values typed by the request's tools)
GLM45_OUTPUT = (
    "<think>The user wants two cities.</think>\nChecking both.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n"
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n</tool_call>"
)
TYPED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
        },
    }
]


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=40))
def test_a_block_format_streams_like_its_whole_response(cuts: list[int]) -> None:
    family = ModelFamily.model_validate(
        {
            "model_name": "glm-x",
            "model_ability": ["chat", "tools", "reasoning"],
            "tool_call_format": "glm45",
            "model_specs": [
                {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": "a/b"}
            ],
        }
    )
    parser = ChatOutputParser.for_request(family, {"tools": TYPED_TOOLS})
    assert parser is not None
    whole = parser.fix_response(response(GLM45_OUTPUT))["choices"][0]
    rewriter = parser.stream()
    streamed = assemble([c for chunk in chunks(chunked(GLM45_OUTPUT, cuts)) for c in rewriter.process(chunk)])
    assert whole["finish_reason"] == streamed["finish_reason"] == "tool_calls"
    assert whole["message"]["reasoning_content"] == streamed["message"]["reasoning_content"].rstrip()
    assert whole["message"]["content"] == streamed["message"]["content"] == "Checking both.\n"
    expected = [("get_weather", {"city": "Paris", "days": 2}), ("get_weather", {"city": "Rome"})]
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in whole["message"]["tool_calls"]
    ] == (expected)
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed["message"]["tool_calls"]] == expected
