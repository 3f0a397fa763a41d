"""The subtitle formats and the stream events of ``api/openai/transcriptions.py``, without a model."""

from __future__ import annotations

import json

import pytest

from xinference.api.openai.audio_files import check_upload, decode_audio
from xinference.api.openai.transcriptions import _events, format_srt, format_vtt
from xinference.errors import InvalidRequest, RequestTooLarge

SEGMENTS = [
    {"start": 0.0, "end": 1.2344, "text": " Hello there."},
    {"start": 3661.5, "end": 3662.0006, "text": " An hour later."},
]


def test_srt_numbers_cues_with_comma_milliseconds() -> None:
    assert format_srt(SEGMENTS) == (
        "1\n00:00:00,000 --> 00:00:01,234\nHello there.\n\n2\n01:01:01,500 --> 01:01:02,001\nAn hour later.\n\n"
    )
    assert format_srt([]) == ""


def test_vtt_has_its_header_and_dot_milliseconds() -> None:
    assert format_vtt(SEGMENTS) == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.234\nHello there.\n\n01:01:01.500 --> 01:01:02.001\nAn hour later.\n\n"
    )


def test_stream_events_follow_openai_names() -> None:
    frames = _events(
        [
            {"type": "segment", "text": " Hello", "start": 0.0, "end": 1.0},
            {"type": "segment", "text": "", "start": 1.0, "end": 1.1},
            {"type": "done", "text": "Hello", "language": "en", "duration": 1.2},
        ]
    )
    events = [json.loads(line[len("data: ") :]) for line in frames.decode().split("\n\n") if line]
    assert events == [
        {"type": "transcript.text.delta", "delta": " Hello"},
        {"type": "transcript.text.done", "text": "Hello", "usage": {"type": "duration", "seconds": 2}},
    ]


def test_uploads_are_checked_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_MAX_AUDIO_BYTES", "1000")
    with pytest.raises(RequestTooLarge, match="limit is"):
        check_upload("a.wav", 1001)
    with pytest.raises(InvalidRequest, match="unsupported file format 'pdf'"):
        check_upload("paper.pdf", 10)
    check_upload("no-extension", 10)  # decoding decides
    with pytest.raises(InvalidRequest, match="empty"):
        decode_audio(b"", "a.wav")
