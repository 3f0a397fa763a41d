"""Speech-to-text with faster-whisper (Whisper on CTranslate2)."""

from __future__ import annotations
