"""Encode synthesized speech (mono float32 samples) into the formats of OpenAI's ``/v1/audio/speech``.

``wav`` and ``pcm`` are written by hand (16-bit little-endian); ``mp3``, ``opus`` (in Ogg), ``aac`` (ADTS) and
``flac`` go through PyAV. An :class:`AudioEncoder` takes samples sentence by sentence and returns the bytes each
call makes ready, so a streamed response sends audio while later sentences are still being synthesized. A streamed
``wav`` carries a header whose sizes say "unknown" (0xFFFFFFFF), as OpenAI's own streamed WAV does: the length is
not known when the header goes out.
"""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CONTENT_TYPES", "AudioEncoder", "AudioFormat", "encode_whole"]

AudioFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]

#: The Content-Type of each format (OpenAI's ``pcm`` is raw 16-bit little-endian samples, 24 kHz there; here the
#: voice's own rate, given in the response's ``X-Sample-Rate`` header).
CONTENT_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}

#: format → (PyAV container, codec, sample rates the codec takes, or None for any)
_CODECS: dict[str, tuple[str, str, tuple[int, ...] | None]] = {
    "mp3": ("mp3", "libmp3lame", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)),
    "opus": ("ogg", "libopus", (8000, 12000, 16000, 24000, 48000)),
    "aac": ("adts", "aac", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)),
    "flac": ("flac", "flac", None),
}
assert set(CONTENT_TYPES) == set(get_args(AudioFormat))


def _pcm16(samples: np.ndarray) -> bytes:
    import numpy as np

    clipped = np.clip(samples, -1.0, 1.0)
    return bytes((clipped * 32767.0).astype("<i2").tobytes())


def _wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """A 44-byte RIFF header for 16-bit mono PCM; ``data_bytes`` None writes the "unknown length" sizes."""
    data = 0xFFFFFFFF if data_bytes is None else data_bytes
    riff = 0xFFFFFFFF if data_bytes is None else 36 + data_bytes
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data)
    )


class _Sink(io.RawIOBase):
    """A write-only file for PyAV's muxer whose written bytes are taken out as they come."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        return len(chunk)

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


class AudioEncoder:
    """One response's encoder: ``add(samples)`` per sentence, then ``close()``; each returns the bytes ready now.

    Not thread-safe; one request's encoder is used by one thread at a time.
    """

    def __init__(self, fmt: str, sample_rate: int, *, streaming: bool) -> None:
        if fmt not in CONTENT_TYPES:
            raise ValueError(f"unknown audio format {fmt!r}; use one of {', '.join(CONTENT_TYPES)}")
        self.format = fmt
        self.sample_rate = sample_rate
        self._streaming = streaming
        self._pcm: list[bytes] = []  # a whole (not streamed) wav keeps its samples until the length is known
        self._header_sent = False
        self._container: Any = None
        if fmt in _CODECS:
            self._open_container()

    def _open_container(self) -> None:
        import av

        container_format, codec, rates = _CODECS[self.format]
        rate = self.sample_rate
        if rates is not None and rate not in rates:
            rate = min((r for r in rates if r >= rate), default=max(rates))
        self._sink = _Sink()
        # Ogg pages are cut every 20 ms instead of every second, so streamed opus leaves with each sentence.
        options = {"page_duration": "20000"} if container_format == "ogg" else {}
        self._container = av.open(self._sink, mode="w", format=container_format, options=options)
        self._stream = self._container.add_stream(codec, rate=rate)
        self._stream.layout = "mono"
        if self.format == "opus":
            self._stream.bit_rate = 32000
        self._resampler = av.AudioResampler(format=self._stream.format.name, layout="mono", rate=rate)
        self._pts = 0

    def add(self, samples: np.ndarray) -> bytes:
        """Encode one piece of audio; returns what is ready to send (possibly nothing yet)."""
        if self.format == "pcm":
            return _pcm16(samples)
        if self.format == "wav":
            return self._add_wav(samples)
        return self._encode(samples)

    def close(self) -> bytes:
        """Flush the encoder; returns the last bytes (the whole file for a wav that was not streamed)."""
        if self.format == "pcm":
            return b""
        if self.format == "wav":
            if self._streaming:
                return b"" if self._header_sent else _wav_header(self.sample_rate, None)
            data = b"".join(self._pcm)
            return _wav_header(self.sample_rate, len(data)) + data
        return self._encode(None)

    def _add_wav(self, samples: np.ndarray) -> bytes:
        pcm = _pcm16(samples)
        if not self._streaming:
            self._pcm.append(pcm)
            return b""
        if not self._header_sent:
            self._header_sent = True
            return _wav_header(self.sample_rate, None) + pcm
        return pcm

    def _encode(self, samples: np.ndarray | None) -> bytes:
        import av
        import numpy as np

        frames: list[Any] = []
        if samples is not None and len(samples):
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1), format="flt", layout="mono"
            )
            frame.sample_rate = self.sample_rate
            frames = list(self._resampler.resample(frame))
        elif samples is None:
            frames = list(self._resampler.resample(None))
        for out in frames:
            out.pts = self._pts
            self._pts += out.samples
            for packet in self._stream.encode(out):
                self._container.mux(packet)
        if samples is None:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
        return self._sink.take()


def encode_whole(pieces: list[np.ndarray], fmt: str, sample_rate: int) -> bytes:
    """A whole file of ``fmt`` from the sentences' samples."""
    encoder = AudioEncoder(fmt, sample_rate, streaming=False)
    out = [encoder.add(piece) for piece in pieces]
    out.append(encoder.close())
    return b"".join(out)
