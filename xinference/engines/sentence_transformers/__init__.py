"""Embedding and rerank models through sentence-transformers (see :mod:`.engine`); imports without torch."""

from __future__ import annotations

__all__: list[str] = []
