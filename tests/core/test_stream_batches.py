"""Which streamed batches start the stream interval (pure: no actor)."""

from __future__ import annotations

from xinference.core.model_actor import _carries_text


def _delta(**fields: object) -> list[dict[str, object]]:
    return [{"choices": [{"index": 0, "delta": fields}]}]


def test_generated_output_of_every_kind_counts_and_the_role_chunk_does_not() -> None:
    assert not _carries_text(_delta(role="assistant", content=""))
    assert _carries_text(_delta(content="Paris"))
    assert _carries_text(_delta(reasoning_content="Let me think"))  # a reasoning model's first tokens
    assert _carries_text(_delta(tool_calls=[{"index": 0, "function": {"arguments": "{"}}]))
    assert _carries_text([{"choices": [{"index": 0, "text": "x"}]}])  # legacy completions
    assert not _carries_text([{"choices": [], "usage": {"completion_tokens": 3}}])
