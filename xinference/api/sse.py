"""Server-sent events framing: ``data: <json>\\n\\n`` frames and the closing ``data: [DONE]``."""

from __future__ import annotations

import json
from typing import Any, Iterable

__all__ = ["DONE_FRAME", "encode_frames"]

DONE_FRAME = b"data: [DONE]\n\n"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_frames(chunks: Iterable[dict[str, Any]]) -> bytes:
    """All ``chunks`` as one byte string of SSE frames (one write per pulled batch, not per token)."""
    return b"".join(b"data: " + _dumps(chunk).encode() + b"\n\n" for chunk in chunks)
