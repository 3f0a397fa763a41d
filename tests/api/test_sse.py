"""One SSE encoder: data chunks and the error frames sent after a stream started are framed the same way."""

from __future__ import annotations

import json

from xinference.api.errors import anthropic_error_body, anthropic_error_event, error_body, error_frame
from xinference.api.sse import encode_events, encode_frames
from xinference.errors import EngineError


def test_error_frame_is_framed_like_the_data_chunks() -> None:
    exc = EngineError("le moteur a échoué")
    frame = error_frame(exc)
    assert frame == encode_frames([error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)])
    assert "échoué".encode() in frame  # UTF-8 as the chunks are, not \\u escapes
    assert json.loads(frame.decode().removeprefix("data: "))["error"]["message"] == exc.message


def test_anthropic_error_event_is_a_named_event_of_the_same_encoder() -> None:
    exc = EngineError("the engine died")
    event = anthropic_error_event(exc)
    assert event == encode_events([("error", anthropic_error_body(exc.message, exc.status_code))])
    name, data = event.decode().strip().split("\n")
    assert name == "event: error"
    assert json.loads(data.removeprefix("data: "))["error"] == {"type": "api_error", "message": "the engine died"}
