"""Issue 13, item 9: the memory of "unsupported field already logged" is bounded, whatever names clients send."""

from __future__ import annotations

from xinference.api import protocol as common
from xinference.api.openai.chat.protocol import ChatCompletionRequest


def test_unknown_field_names_do_not_grow_memory_without_bound() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for i in range(5000):  # a client (or a fuzzer) inventing a new field name per request
        ChatCompletionRequest.model_validate({**base, f"field_{i}": 1})
    assert len(common._reported) <= 1024
