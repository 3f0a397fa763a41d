"""Server-sent events framing: ``data: <json>\\n\\n`` frames and the closing ``data: [DONE]``; named events
(``event: <name>``, then the data line) for the APIs whose clients dispatch on the event name (Messages, Responses).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Union

__all__ = ["DONE_FRAME", "encode_events", "encode_frames"]

DONE_FRAME = b"data: [DONE]\n\n"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_frames(chunks: Iterable[Union[dict[str, Any], bytes]]) -> bytes:
    """All ``chunks`` as one byte string of SSE frames (one write per pulled batch, not per token). A chunk that is
    already JSON text (bytes, see ``engines.base.Chunk``) is written as it is, never decoded."""
    return b"".join(
        b"data: " + (chunk if isinstance(chunk, bytes) else _dumps(chunk).encode()) + b"\n\n" for chunk in chunks
    )


def encode_events(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """``(name, payload)`` pairs as one byte string of named SSE events."""
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + _dumps(payload).encode() + b"\n\n" for name, payload in events
    )
