"""Which requests the Transformers engine decodes with special tokens kept: those whose parser looks for a marker
that is (or holds) one of the tokenizer's special tokens. Decoding them away would hide gpt-oss's channels or
Kimi's call section from the parser, and the reply would land in the content unsplit."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from xinference.engines.transformers.engine import markers_are_special  # noqa: E402
from xinference.model.parsers.postprocess import ChatOutputParser  # noqa: E402
from xinference.model.parsers.reasoning import ReasoningTags  # noqa: E402
from xinference.model.parsers.registry import get_tool_call_format  # noqa: E402

HARMONY_SPECIAL = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"]


def test_harmony_reasoning_keeps_special_tokens_even_without_tools() -> None:
    parser = ChatOutputParser(reasoning=ReasoningTags("<|channel|>analysis<|message|>", "<|end|>"))
    assert markers_are_special(parser, HARMONY_SPECIAL)


def test_a_special_tool_opener_keeps_them() -> None:
    parser = ChatOutputParser(tool_format=get_tool_call_format("kimi_k2"))
    assert markers_are_special(parser, ["<|tool_calls_section_begin|>", "<|im_end|>"])


def test_plain_text_markers_decode_without_them() -> None:
    parser = ChatOutputParser(tool_format=get_tool_call_format("hermes"), reasoning=ReasoningTags())
    # Qwen3 lists <think> and <tool_call> as added tokens that are not special
    assert not markers_are_special(parser, ["<|im_end|>", "<|endoftext|>"])
