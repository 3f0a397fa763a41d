"""hibari's English voices (ONNX + numpy) through the ``hibari-tts`` package (see :mod:`.engine`); imports
without it."""

from __future__ import annotations

__all__: list[str] = []
