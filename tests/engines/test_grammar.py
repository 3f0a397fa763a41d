"""engines/grammar.py: constraints from requests, and the numpy bitmask path (no torch, no transformers)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("llguidance")

from benchmark._weights import converted_smollm2  # noqa: E402
from xinference.engines.grammar import (  # noqa: E402
    GrammarTokenizer,
    allocate_bitmask,
    apply_bitmask_numpy,
    bitmask_to_bool,
    constraint_for,
)
from xinference.errors import InvalidRequest  # noqa: E402
from xinference.model.parsers.hermes import HERMES  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer() -> GrammarTokenizer:
    return GrammarTokenizer.from_file(str(converted_smollm2() / "tokenizer.json"), 49152, [2])


def drive(tokenizer: GrammarTokenizer, constraint, text: str) -> bool:
    """Feed ``text``'s tokens; each must be allowed by the mask computed before it."""
    matcher = constraint.matcher(tokenizer)
    mask = allocate_bitmask(1, tokenizer.vocab_size)
    for token in tokenizer.inner.tokenize_str(text):
        matcher.fill_bitmask(mask[0])
        if not bitmask_to_bool(mask[0], tokenizer.vocab_size)[token]:
            return False
        assert matcher.accept(token)
    return matcher.done


def test_forced_call_in_the_family_markers_and_bare(tokenizer) -> None:
    hermes = constraint_for({"tools": TOOLS, "tool_choice": "required"}, HERMES)
    assert hermes.kind == "tool_call" and hermes.tool_format is HERMES
    assert drive(tokenizer, hermes, '<tool_call>\n{"name": "f", "arguments": {"x": 3}}\n</tool_call>')
    assert not drive(tokenizer, hermes, '<tool_call>\n{"name": "g", "arguments": {"x": 3}}\n</tool_call>')
    bare = constraint_for({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert bare.tool_format.name == "json"
    assert drive(tokenizer, bare, '{"name": "f", "arguments": {"x": 3}}')
    assert not drive(tokenizer, bare, '{"name": "f", "arguments": {"x": "three"}}')


def test_response_formats(tokenizer) -> None:
    assert constraint_for({}) is None and constraint_for({"response_format": {"type": "text"}}) is None
    assert drive(tokenizer, constraint_for({"response_format": {"type": "json_object"}}), '{"a": [1, 2]}')
    schema = {"type": "object", "properties": {"a": {"enum": ["yes", "no"]}}, "required": ["a"]}
    strict = constraint_for({"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})
    assert drive(tokenizer, strict, '{"a": "yes"}') and not drive(tokenizer, strict, '{"a": "maybe"}')
    for bad, field in [
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            constraint_for(bad)
        assert info.value.param == field


def test_numpy_mask_matches_llguidance_and_needs_no_torch(tokenizer) -> None:
    import llguidance.numpy as reference

    matcher = constraint_for({"response_format": {"type": "json_object"}}).matcher(tokenizer)
    mask = allocate_bitmask(1, 49152)
    matcher.fill_bitmask(mask[0])
    ours = np.zeros(49152, dtype=np.float32)
    apply_bitmask_numpy(ours, mask[0])
    theirs = np.zeros((1, 49152), dtype=np.float32)
    reference.apply_token_bitmask_inplace(theirs, mask)
    assert np.array_equal(np.isinf(ours), np.isinf(theirs[0])) and 0 < np.isfinite(ours).sum() < 49152
    code = (
        "import sys, numpy as np; from xinference.engines.grammar import *; "
        f"t = GrammarTokenizer.from_file({json.dumps(str(converted_smollm2() / 'tokenizer.json'))}, 49152, [2]); "
        "m = constraint_for({'response_format': {'type': 'json_object'}}).matcher(t); "
        "b = allocate_bitmask(1, 49152); m.fill_bitmask(b[0]); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
