"""The speech encoder: every OpenAI format decodes with PyAV to the length it was given, whole and streamed."""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import pytest

from xinference.engines.speech.encode import CONTENT_TYPES, AudioEncoder, encode_whole

RATE = 22050


def tone(seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def decoded_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(audio=0))
    return sum(f.samples for f in frames) / frames[0].sample_rate


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
@pytest.mark.parametrize("streaming", [False, True])
def test_every_container_format_decodes_to_its_length(fmt: str, streaming: bool) -> None:
    encoder = AudioEncoder(fmt, RATE, streaming=streaming)
    parts = [encoder.add(tone(1.0)), encoder.add(tone(0.5)), encoder.close()]
    assert decoded_seconds(b"".join(parts)) == pytest.approx(1.5, abs=0.12)
    if streaming and fmt != "wav":
        assert parts[0], f"{fmt}: the first sentence's bytes must leave before the encoder closes"


def test_pcm_is_raw_16_bit_samples() -> None:
    data = encode_whole([tone(0.25), tone(0.25)], "pcm", RATE)
    assert len(data) == 2 * int(0.25 * RATE) * 2
    samples = np.frombuffer(data, dtype="<i2")
    assert 0.25 < samples.max() / 32767 < 0.35


def test_whole_wav_has_exact_sizes_and_streamed_wav_says_unknown() -> None:
    whole = encode_whole([tone(0.5)], "wav", RATE)
    riff, data_size = struct.unpack("<I", whole[4:8])[0], struct.unpack("<I", whole[40:44])[0]
    assert whole[:4] == b"RIFF" and riff == len(whole) - 8 and data_size == len(whole) - 44
    assert struct.unpack("<I", whole[24:28])[0] == RATE
    encoder = AudioEncoder("wav", RATE, streaming=True)
    first = encoder.add(tone(0.5))
    assert first[:4] == b"RIFF" and first[4:8] == b"\xff\xff\xff\xff" and len(first) == 44 + int(0.5 * RATE) * 2
    assert encoder.add(tone(0.5))[:4] != b"RIFF"  # the header goes out once


def test_opus_is_resampled_to_a_rate_libopus_takes() -> None:
    data = encode_whole([tone(1.0)], "opus", RATE)
    with av.open(io.BytesIO(data)) as container:
        assert container.format.name == "ogg"
        assert container.streams.audio[0].codec_context.name == "opus"
    assert decoded_seconds(data) == pytest.approx(1.0, abs=0.1)


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown audio format 'ogg'"):
        AudioEncoder("ogg", RATE, streaming=False)
    assert set(CONTENT_TYPES) == {"mp3", "opus", "aac", "flac", "wav", "pcm"}
