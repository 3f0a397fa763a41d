"""Tool-call and reasoning parsers on recorded outputs, whole and streamed in random chunkings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.model.parsers.recorded import REASONING, TOOL_CALLS, Reasoned, WithCalls
from xinference.model.parsers import (
    ReasoningTags,
    ToolCallDelta,
    get_tool_call_format,
    parse_tool_calls,
    reasoning_tags_of,
    split_reasoning,
    tool_call_format_of,
)
from xinference.model.parsers.reasoning import ReasoningSplitter
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def split_streamed(stream: ReasoningSplitter, pieces: list[str]) -> dict[str, str]:
    """The reasoning and the content a reasoning stream makes of ``pieces`` (its events joined per kind)."""
    parts = {"reasoning": "", "content": ""}
    for piece in pieces:
        for kind, text in stream.feed(piece):
            parts[kind] += text
    for kind, text in stream.finish():
        parts[kind] += text
    return parts


def stream_calls(fmt_name: str, pieces: list[str], tools: list | None = None) -> tuple[str, list[dict]]:
    """Content and calls (id, name, arguments) from streaming ``pieces``, checking the events' order and ids."""
    stream = get_tool_call_format(fmt_name).stream(tools)
    events = []
    for piece in pieces:
        events += stream.feed(piece)
    events += stream.finish()
    content, calls = "", []
    for event in events:
        if isinstance(event, str):
            content += event
            continue
        assert isinstance(event, ToolCallDelta)
        if event.name is not None:
            assert event.index == len(calls) and event.id and event.arguments == ""
            calls.append({"id": event.id, "name": event.name, "arguments": ""})
        else:
            assert event.id is None and event.index == len(calls) - 1  # pieces belong to the newest call
            calls[event.index]["arguments"] += event.arguments
    return content, calls


@pytest.mark.parametrize("case", TOOL_CALLS, ids=lambda c: c.text[:30])
def test_whole_text(case: WithCalls) -> None:
    content, calls = parse_tool_calls(get_tool_call_format(case.fmt), case.text)
    assert content == case.content
    assert [(c.name, json.loads(c.arguments)) for c in calls] == case.calls
    assert len({c.id for c in calls}) == len(calls) and all(c.id.startswith("call_") for c in calls)


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(TOOL_CALLS), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_streamed_in_random_chunks_equals_whole(case: WithCalls, cuts: list[int]) -> None:
    content, calls = stream_calls(case.fmt, chunked(case.text, cuts))
    assert content == case.content
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == case.calls


def test_text_before_a_call_streams_before_the_call_ends() -> None:
    stream = get_tool_call_format("hermes").stream()
    early = stream.feed('Checking.\n<tool_call>\n{"name": "f", "arguments": {"city": "Par')
    assert early[0] == "Checking.\n"
    assert isinstance(early[1], ToolCallDelta) and early[1].name == "f" and early[1].index == 0
    assert "".join(e.arguments for e in early[2:] if isinstance(e, ToolCallDelta)) == '{"city": "Par'
    rest = stream.feed('is"}}\n</tool_call>') + stream.finish()
    assert "".join(e.arguments for e in rest if isinstance(e, ToolCallDelta)) == 'is"}'


def test_truncated_call_before_its_name_is_content() -> None:
    content, calls = parse_tool_calls(get_tool_call_format("hermes"), 'Ok <tool_call>\n{"na')
    assert calls == [] and content == 'Ok <tool_call>\n{"na'


@pytest.mark.parametrize("case", REASONING, ids=lambda c: c.text[:30])
def test_reasoning_whole(case: Reasoned) -> None:
    assert split_reasoning(ReasoningTags(), case.text, enabled=case.enabled, primed=case.primed) == (
        case.reasoning,
        case.content,
    )


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(REASONING), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_reasoning_streamed_in_random_chunks(case: Reasoned, cuts: list[int]) -> None:
    parts = split_streamed(ReasoningTags().stream(enabled=case.enabled, primed=case.primed), chunked(case.text, cuts))
    assert (parts["reasoning"].rstrip() or None, parts["content"]) == (case.reasoning, case.content)
    assert "<think>" not in parts["content"] and "</think>" not in parts["content"]


def test_other_tags_and_primed_reasoning_streams_at_once() -> None:
    tags = ReasoningTags("<|begin_of_thought|>", "<|end_of_thought|>")
    assert split_reasoning(tags, "<|begin_of_thought|>a<|end_of_thought|>b") == ("a", "b")
    stream = ReasoningTags().stream(primed=True)
    assert stream.feed("Hmm, let") == [("reasoning", "Hmm, let")]  # not held back when the prompt opened the block


def test_registry_and_family_fields() -> None:
    registry = ModelRegistry()
    assert tool_call_format_of(registry.get("qwen2.5-instruct")).name == "hermes"
    assert tool_call_format_of(registry.get("llama-3.1-instruct")).name == "llama3_json"
    assert tool_call_format_of(registry.get("mistral-instruct-v0.3")).name == "mistral"
    assert reasoning_tags_of(registry.get("qwen3")) == ReasoningTags("<think>", "</think>")
    assert reasoning_tags_of(registry.get("smollm2-instruct")) is None
    base = {
        "model_name": "x",
        "model_ability": ["chat"],
        "model_specs": [
            {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": "a/b"}
        ],
    }
    family = ModelFamily.model_validate(
        {**base, "tool_parser": "qwen", "reasoning_start_tag": "<r>", "reasoning_end_tag": "</r>"}
    )  # Xinference's names
    assert tool_call_format_of(family).name == "hermes" and reasoning_tags_of(family) == ReasoningTags("<r>", "</r>")
    with pytest.raises(ValueError, match="known: .*hermes"):
        ModelFamily.model_validate({**base, "tool_call_format": "nope"})
    with pytest.raises(ValueError, match="go together"):
        ModelFamily.model_validate({**base, "reasoning_start_tag": "<r>"})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(
    before=st.text(alphabet=st.characters(blacklist_characters="<{["), max_size=20),
    arguments=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4),
    fmt=st.sampled_from(["hermes", "mistral", "llama3_json"]),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=40),
)
def test_any_arguments_survive_any_chunking(before: str, arguments: dict, fmt: str, cuts: list[int]) -> None:
    call = json.dumps(
        {"name": "f", "arguments" if fmt != "llama3_json" else "parameters": arguments}, ensure_ascii=False
    )
    text = {
        "hermes": f"{before}<tool_call>\n{call}\n</tool_call>",
        "mistral": f"{before}[TOOL_CALLS][{call}]",
        "llama3_json": call,
    }[fmt]
    content, calls = stream_calls(fmt, chunked(text, cuts))
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("f", arguments)]
    assert content == ("" if fmt == "llama3_json" else before)
