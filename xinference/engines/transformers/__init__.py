"""Causal LMs in the pytorch format through Hugging Face Transformers (see :mod:`.engine`); imports without torch."""

from __future__ import annotations

__all__: list[str] = []
