"""Every tool-call format the catalog names, on recorded outputs: whole, streamed in random chunkings, and with
the request's tools; the reasoning tag styles; harmony's channels; the post-processor on a new format."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.model.parsers.recorded import (
    FORMAT_CALLS,
    HARMONY_REPLIES,
    REASONING_STYLES,
    WEATHER_TOOLS,
    FormatSample,
    TaggedReasoning,
)
from tests.model.parsers.test_parsers import chunked, split_streamed, stream_calls
from xinference.model.parsers import ReasoningTags, get_tool_call_format, parse_tool_calls
from xinference.model.parsers.harmony import HARMONY
from xinference.model.parsers.postprocess import ChatOutputParser
from xinference.model.parsers.registry import FORMATS, TOOL_CALL_FORMATS, reasoning_tags_of
from xinference.model.spec import ModelFamily

#: the names the catalog's entries use (and vLLM's engine table maps): each must be a known format
CATALOG_NAMES = [
    "hermes",
    "llama3_json",
    "mistral",
    "qwen3_coder",
    "glm45",
    "glm4",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "kimi_k2",
    "pythonic",
    "gemma3",
    "gemma4",
    "phi4_mini_json",
    "internlm",
    "harmony",
]


def test_catalog_names_are_registered() -> None:
    for name in CATALOG_NAMES:
        assert get_tool_call_format(name).name == name
    assert {fmt.name for fmt in FORMATS} == set(CATALOG_NAMES)
    assert get_tool_call_format("GLM45") is TOOL_CALL_FORMATS["glm45"]
    # Xinference's and vLLM's own names
    for alias, name in {
        "qwen": "hermes",
        "glm5": "glm45",
        "glm47": "glm45",
        "deepseek-r1": "deepseek_v3",
        "deepseek-v3.1": "deepseek_v31",
        "deepseek-v3.2": "deepseek_v32",
        "gemma": "gemma4",
        "llama4_pythonic": "pythonic",
        "openai": "harmony",
    }.items():
        assert get_tool_call_format(alias).name == name


@pytest.mark.parametrize("case", FORMAT_CALLS, ids=lambda c: f"{c.fmt}:{c.text[:24]}")
def test_whole_text(case: FormatSample) -> None:
    content, calls = parse_tool_calls(get_tool_call_format(case.fmt), case.text, case.tools)
    assert content == case.content
    assert [(c.name, json.loads(c.arguments)) for c in calls] == case.calls
    assert all(isinstance(json.loads(c.arguments), dict) for c in calls)  # OpenAI's shape: a JSON object text
    if case.ids is not None:
        assert [c.id for c in calls] == case.ids
    else:
        assert all(c.id.startswith("call_") for c in calls) and len({c.id for c in calls}) == len(calls)


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(FORMAT_CALLS), cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=60))
def test_streamed_in_random_chunks_equals_whole(case: FormatSample, cuts: list[int]) -> None:
    content, calls = stream_calls(case.fmt, chunked(case.text, cuts), case.tools)
    assert content == case.content
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == case.calls


@pytest.mark.parametrize("case", [c for c in FORMAT_CALLS if c.calls], ids=lambda c: f"{c.fmt}:{c.text[:24]}")
def test_no_marker_leaks_while_streaming(case: FormatSample) -> None:
    """Fed one character at a time, no content delta carries a piece of a marker (held back until decided)."""
    stream = get_tool_call_format(case.fmt).stream(case.tools)
    sent = ""
    for ch in case.text:
        sent += "".join(e for e in stream.feed(ch) if isinstance(e, str))
    sent += "".join(e for e in stream.finish() if isinstance(e, str))
    assert sent == case.content


def test_text_after_the_calls_is_kept() -> None:
    content, calls = parse_tool_calls(
        get_tool_call_format("kimi_k2"),
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>Done.",
    )
    assert [c.name for c in calls] == ["f"] and content == "Done."


def test_raw_values_follow_the_schema_only_when_tools_are_known() -> None:
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=zip>\n02139\n</parameter>\n"
        "<parameter=scale>\n2\n</parameter>\n<parameter=metric>\nFalse\n</parameter>\n</function>\n</tool_call>"
    )
    fmt = get_tool_call_format("qwen3_coder")
    _, typed = parse_tool_calls(fmt, text, WEATHER_TOOLS)
    assert json.loads(typed[0].arguments) == {"zip": "02139", "scale": 2, "metric": False}
    _, guessed = parse_tool_calls(fmt, text)
    assert json.loads(guessed[0].arguments) == {"zip": "02139", "scale": 2, "metric": "False"}  # not JSON: text
    # a value that does not fit its declared type is kept as written
    _, kept = parse_tool_calls(fmt, text.replace("\n2\n", "\nabout two\n"), WEATHER_TOOLS)
    assert json.loads(kept[0].arguments)["scale"] == "about two"


def test_glm4_bare_name_must_be_a_requested_tool() -> None:
    fmt = get_tool_call_format("glm4")
    text = 'Summary\n{"a": 1}'
    assert parse_tool_calls(fmt, text, WEATHER_TOOLS) == (text, [])
    assert [c.name for c in parse_tool_calls(fmt, text)[1]] == ["Summary"]  # tools unknown: the shape decides


@settings(max_examples=60, deadline=None)
@given(
    city=st.text(max_size=12).filter(lambda s: "<" not in s and s == s.strip()),
    days=st.integers(min_value=-5, max_value=10_000),
    fmt=st.sampled_from(["qwen3_coder", "glm45", "deepseek_v32", "gemma4"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=40),
)
def test_any_values_survive_any_chunking(city: str, days: int, fmt: str, cuts: list[int]) -> None:
    text = {
        "qwen3_coder": f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n"
        f"<parameter=days>\n{days}\n</parameter>\n</function>\n</tool_call>",
        "glm45": f"<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{city}</arg_value>\n"
        f"<arg_key>days</arg_key>\n<arg_value>{days}</arg_value>\n</tool_call>",
        "deepseek_v32": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        f'<｜DSML｜parameter name="city" string="true">{city}</｜DSML｜parameter>\n'
        f'<｜DSML｜parameter name="days" string="false">{days}</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        "</｜DSML｜function_calls>",
        "gemma4": f'<|tool_call>call:get_weather{{city:<|"|>{city}<|"|>,days:{days}}}<tool_call|>',
    }[fmt]
    content, calls = stream_calls(fmt, chunked(text, cuts), WEATHER_TOOLS)
    assert content == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": city, "days": days})]


@pytest.mark.parametrize("case", REASONING_STYLES, ids=lambda c: c.start)
def test_reasoning_tag_styles(case: TaggedReasoning) -> None:
    for cuts in ([], [1, 2, 3, 5, 8, 13, 21], list(range(len(case.text)))):
        parts = split_streamed(ReasoningTags(case.start, case.end).stream(primed=case.primed), chunked(case.text, cuts))
        assert (parts["reasoning"].rstrip() or None, parts["content"]) == (case.reasoning, case.content)


@pytest.mark.parametrize("reply", HARMONY_REPLIES, ids=lambda r: r[0][:30])
def test_harmony_channels(reply: tuple) -> None:
    text, reasoning, content, calls = reply
    for cuts in ([], list(range(len(text)))):
        parts = split_streamed(HARMONY.stream(), chunked(text, cuts))
        assert (parts["reasoning"] or None) == reasoning
        rest, found = parse_tool_calls(get_tool_call_format("harmony"), parts["content"])
        assert rest == content
        assert [(c.name, json.loads(c.arguments)) for c in found] == calls


def family(**fields: object) -> ModelFamily:
    return ModelFamily.model_validate(
        {
            "model_name": "x",
            "model_ability": ["chat", "tools", "reasoning"],
            "model_specs": [
                {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": "a/b"}
            ],
            **fields,
        }
    )


def test_postprocess_on_a_family_that_starts_inside_reasoning() -> None:
    """Qwen3-Coder-style XML after a reasoning block the template opened: typed by the request's tools."""
    fam = family(tool_call_format="qwen3_coder", reasoning_starts_inside=True)
    parser = ChatOutputParser.for_request(fam, {"tools": WEATHER_TOOLS})
    assert parser is not None and parser.primed
    text = (
        "I need the weather.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    reasoning, content, calls = parser.parse_text(text)
    assert reasoning == "I need the weather." and content == "Checking.\n"
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"days": 2})]
    # streamed, the reasoning goes out before its end tag arrives
    rewriter = parser.stream()
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    first = rewriter.process({**base, "choices": [{"index": 0, "delta": {"content": "I need"}, "finish_reason": None}]})
    assert first[0]["choices"][0]["delta"] == {"reasoning_content": "I need"}
    # thinking off: nothing is primed
    off = ChatOutputParser.for_request(fam, {"tools": WEATHER_TOOLS, "enable_thinking": False})
    assert off is not None and off.parse_text("Hi")[:2] == (None, "Hi")


def test_harmony_family_end_to_end() -> None:
    fam = family(
        tool_call_format="harmony", reasoning_start_tag="<|channel|>analysis<|message|>", reasoning_end_tag="<|end|>"
    )
    assert reasoning_tags_of(fam) is HARMONY
    parser = ChatOutputParser.for_request(fam, {"tools": WEATHER_TOOLS})
    assert parser is not None
    reasoning, content, calls = parser.parse_text(HARMONY_REPLIES[1][0])
    assert reasoning == "Need to call get_weather." and content is None
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "San Francisco"})]


def test_declared_types_in_their_usual_spellings() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "ratio": {"type": "float"},
                        "count": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                        "note": {"type": ["string", "null"]},
                        "tags": {"type": "array"},
                        "mode": {"enum": ["fast", "slow"]},
                        "level": {"enum": [1, 2, 3]},
                    },
                },
            },
        }
    ]
    text = "<tool_call>f" + "".join(
        f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
        for k, v in [("ratio", "3.14"), ("count", "null"), ("note", "42"), ("tags", "['a', 'b']"), ("mode", "fast")]
        + [("level", "2")]
    )
    _, [call] = parse_tool_calls(get_tool_call_format("glm45"), text + "</tool_call>", tools)
    assert json.loads(call.arguments) == {
        "ratio": 3.14,
        "count": None,
        "note": "42",
        "tags": ["a", "b"],  # a Python-style list is read as a literal, never evaluated
        "mode": "fast",
        "level": 2,
    }


# pieces of every format's syntax, for texts that are almost calls
_PIECES = [
    *{m for fmt in FORMATS for m in fmt.openers},
    "</tool_call>",
    "</function>",
    "<parameter=city>",
    "</parameter>",
    "<arg_key>city</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁calls▁end｜>",
    "</｜DSML｜invoke>",
    '<｜DSML｜invoke name="get_weather">',
    '<｜DSML｜parameter name="city" string="true">',
    "</｜DSML｜parameter>",
    "</｜DSML｜function_calls>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "functions.get_weather:0",
    "<tool_call|>",
    "call:get_weather",
    '<|"|>',
    "<|message|>",
    "<|call|>",
    "<|end|>",
    "<|/tool_call|>",
    "<|action_end|>",
    "```",
    "get_weather",
    '{"city": "Paris"}',
    '{"name": "get_weather", "arguments": {"city": "Rome"}}',
    '(city="Oslo")',
    "{",
    "}",
    "[",
    "]",
    "\n",
    " ",
    "text",
    "<",
    "|",
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=14),
    fmt=st.sampled_from(CATALOG_NAMES),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=30),
)
def test_any_text_streams_as_it_parses_whole(pieces: list[str], fmt: str, cuts: list[int]) -> None:
    """Whatever the model writes: no exception, nothing lost or duplicated, the same answer however it is cut."""
    text = "".join(pieces)
    content, calls = parse_tool_calls(get_tool_call_format(fmt), text, WEATHER_TOOLS)
    streamed_content, streamed_calls = stream_calls(fmt, chunked(text, cuts), WEATHER_TOOLS)
    assert streamed_content == content
    assert [(c["name"], c["arguments"]) for c in streamed_calls] == [(c.name, c.arguments) for c in calls]
    for call in calls:
        assert isinstance(json.loads(call.arguments), dict)
    if not calls:
        assert content == text  # no call found: the text is given back whole
