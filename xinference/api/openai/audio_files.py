"""Uploaded audio files: their size limit and their decoding (PyAV) into the samples speech-to-text engines take.

Decoding runs in the API process, on a thread, before any model is called: a file that is not audio, or is cut
short, is a 400 naming the file, and the model process only ever sees good samples (float32 mono at 16 kHz).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

from xinference.errors import InvalidRequest, ModelUnavailable, RequestTooLarge

__all__ = [
    "AUDIO_EXTENSIONS",
    "SAMPLE_RATE",
    "DecodedAudio",
    "decode_audio",
    "max_upload_bytes",
]

#: What speech-to-text engines take: mono samples at this rate (Whisper's).
SAMPLE_RATE = 16_000
#: The file types OpenAI's audio API lists, plus the other containers PyAV reads for the same codecs.
AUDIO_EXTENSIONS = frozenset(
    {"flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm", "aac", "wma", "mkv"}
)
#: OpenAI's own upload limit.
_DEFAULT_MAX_BYTES = 25 * 1024 * 1024


def max_upload_bytes() -> int:
    """The largest audio upload accepted (``XINFERENCE_MAX_AUDIO_BYTES``, default 25 MiB as OpenAI's)."""
    raw = os.environ.get("XINFERENCE_MAX_AUDIO_BYTES", "")
    try:
        value = int(raw)
    except ValueError:
        return _DEFAULT_MAX_BYTES
    return value if value > 0 else _DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class DecodedAudio:
    """Float32 little-endian mono samples at :data:`SAMPLE_RATE`, and how long they last."""

    samples: bytes

    @property
    def seconds(self) -> float:
        return len(self.samples) / 4 / SAMPLE_RATE


def check_upload(filename: str, size: int) -> None:
    """Refuse a file over the limit (413) or with an extension that is not audio (400), before reading it."""
    limit = max_upload_bytes()
    if size > limit:
        raise RequestTooLarge(
            f"the file {filename[:80]!r} is {size / 1024**2:.1f} MiB; the limit is {limit / 1024**2:.0f} MiB",
            param="file",
        )
    _, dot, extension = filename.rpartition(".")
    if dot and extension.lower() not in AUDIO_EXTENSIONS:
        raise InvalidRequest(
            f"unsupported file format {extension[:20]!r} of {filename[:80]!r}; send one of: "
            f"{', '.join(sorted(AUDIO_EXTENSIONS))}",
            param="file",
        )


def decode_audio(data: bytes, filename: str) -> DecodedAudio:
    """Decode ``data`` (any container and codec FFmpeg reads) to mono float32 at 16 kHz. Blocking: call it on a
    thread. InvalidRequest names the file when it holds no audio or cannot be decoded."""
    try:
        import av
    except ImportError:
        raise ModelUnavailable("decoding audio needs PyAV on the API server: pip install 'xinference[audio]'") from None
    name = filename[:80]
    if not data:
        raise InvalidRequest(f"the file {name!r} is empty", param="file")
    out = bytearray()
    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise InvalidRequest(f"the file {name!r} has no audio stream", param="file")
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(stream):
                for converted in resampler.resample(frame):
                    out += bytes(converted.planes[0])[: converted.samples * 4]
            for converted in resampler.resample(None):  # what the resampler still holds
                out += bytes(converted.planes[0])[: converted.samples * 4]
    except InvalidRequest:
        raise
    except (av.FFmpegError, ValueError, OSError, EOFError) as exc:
        raise InvalidRequest(f"the file {name!r} could not be decoded as audio: {exc}", param="file") from None
    if not out:
        raise InvalidRequest(f"the file {name!r} holds no audio samples", param="file")
    return DecodedAudio(bytes(out))
