"""Spoken test audio made at test time with Debian's espeak-ng (``apt-get install espeak-ng``): real speech for the
speech-to-text tests, without shipping recordings. Tests that need it skip with that hint when it is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["SENTENCE", "WORDS", "speak"]

#: What the generated audio says, and the words a transcript of it must contain.
SENTENCE = "The quick brown fox jumps over the lazy dog. Thank you very much."
WORDS = ("quick", "fox", "lazy dog", "thank you")


def speak(path: Path, text: str = SENTENCE) -> Path:
    """Write ``text`` spoken by espeak-ng to the WAV file ``path`` (22.05 kHz mono), a little slower than its
    default (130 words a minute), which Whisper tiny.en hears word for word."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        pytest.skip("espeak-ng is not installed (apt-get install -y espeak-ng)")
    subprocess.run([binary, "-s", "130", "-w", str(path), text], check=True, capture_output=True, timeout=60)
    return path
