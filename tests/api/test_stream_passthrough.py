"""Chunks an engine passed as JSON text (``engines.base.Chunk``) reach the client as written, and what the platform
records of a stream (first token, usage) is still read from them; the usage the client did not ask for is still
removed. The end-to-end check against llama.cpp is ``tests/api/openai/chat/test_stream_passthrough_e2e.py``."""

from __future__ import annotations

import json
from typing import Any

from xinference.api.gateway.admission import Gate, Ticket
from xinference.api.metrics import observe_batch
from xinference.api.sse import encode_frames
from xinference.engines.base import Chunk


class _Sink:
    """Where a gate reports (a test double for the API's Metrics; nothing here is reported)."""

    def finished(self, ticket: Ticket) -> None:
        pass

    def rejected(self, model: str, engine: str, route: str, reason: str) -> None:
        pass


def _ticket() -> Ticket:
    return Ticket(Gate("m", "vLLM", capacity=1, max_queued=1, queue_timeout=1, sink=_Sink()), "/v1/chat", 0.0)


def _text(chunk: dict[str, Any]) -> bytes:
    return json.dumps(chunk, separators=(",", ":")).encode()


ROLE = _text({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
TOKEN = _text({"id": "c", "choices": [{"index": 0, "delta": {"content": "héllo"}, "finish_reason": None}]})
USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
LAST = _text({"id": "c", "choices": [], "usage": USAGE})


def test_text_chunks_are_written_as_they_are() -> None:
    frames = encode_frames([TOKEN, {"id": "d", "choices": []}])
    assert frames == b"data: " + TOKEN + b'\n\ndata: {"id":"d","choices":[]}\n\n'


def test_first_token_and_usage_are_read_from_text_chunks() -> None:
    ticket = _ticket()
    assert observe_batch(ticket, [ROLE], keep_usage=True) == [ROLE]
    assert ticket.first_token is None  # the role chunk carries no text
    batch: list[Chunk] = [TOKEN, LAST]
    assert observe_batch(ticket, batch, keep_usage=True) == batch  # asked for: kept, as the same bytes
    assert ticket.first_token is not None
    assert (ticket.prompt_tokens, ticket.generation_tokens) == (5, 2)


def test_usage_not_asked_for_is_removed_from_text_chunks() -> None:
    ticket = _ticket()
    assert observe_batch(ticket, [TOKEN, LAST], keep_usage=False) == [TOKEN]  # a usage-only chunk is dropped
    assert ticket.generation_tokens == 2
    finishing = _text({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE})
    (kept,) = observe_batch(_ticket(), [finishing], keep_usage=False)
    assert kept == {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def test_a_token_chunk_is_not_decoded_once_the_first_token_was_seen() -> None:
    ticket = _ticket()
    ticket.mark_first_token()
    broken = b'{"not json'  # would raise if anything decoded it
    assert observe_batch(ticket, [broken], keep_usage=False) == [broken]
