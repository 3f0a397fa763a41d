"""Piper voices (ONNX, VITS) through the ``piper-tts`` package (see :mod:`.engine`); imports without it."""

from __future__ import annotations

__all__: list[str] = []
