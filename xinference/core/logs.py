"""Reading a model replica's log for ``GET /v1/models/{uid}/logs`` (the web UI's Logs page, ``xinference logs``).

A replica's log (``XINFERENCE_HOME/logs/models/<replica>.log``) grows without bound while the model runs, so a
read is always bounded: at most :data:`MAX_TAIL_LINES` lines and :data:`MAX_READ_BYTES` bytes from the end of
the file. A follower passes back the ``offset`` of its previous answer as ``since`` and gets only what was
written after it (``reset`` tells it the file was truncated, e.g. by a restart of the replica, so it should
clear what it shows). Local paths are shortened the way every other error text is (``scrub_paths``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_TAIL_LINES", "MAX_READ_BYTES", "MAX_TAIL_LINES", "read_log"]

DEFAULT_TAIL_LINES = 200
MAX_TAIL_LINES = 5000
#: The most bytes one read returns (from the end of the file, or from ``since``).
MAX_READ_BYTES = 1024 * 1024


def read_log(path: Path, tail: int = DEFAULT_TAIL_LINES, since: int | None = None) -> dict[str, Any]:
    """The last ``tail`` lines of ``path`` (or those written after byte ``since``), paths scrubbed.

    Returns ``{"lines", "offset", "size", "truncated", "reset"}``: ``offset`` is where the next follow-up read
    starts; ``truncated`` says older text exists that was not returned. A missing file reads as empty (a replica
    whose process has not written yet)."""
    from xinference.logtail import scrub_paths

    tail = max(0, min(int(tail), MAX_TAIL_LINES))
    try:
        size = os.path.getsize(path)
    except OSError:
        return {"lines": [], "offset": 0, "size": 0, "truncated": False, "reset": False}
    reset = since is not None and since > size
    start = 0 if since is None or reset else since
    first = max(start, size - MAX_READ_BYTES)
    with path.open("rb") as handle:
        handle.seek(first)
        data = handle.read(size - first)
    cut_partial = first > start  # began mid-file: the first line may be cut, drop it
    # Only whole lines: a line still being written is left for the next read.
    end = data.rfind(b"\n") + 1
    offset = first + end if end or not cut_partial else size  # a 1 MiB line with no end: skip it
    complete = data[:end].decode("utf-8", errors="replace")
    lines = complete.splitlines()
    if cut_partial and lines:
        lines = lines[1:]
    truncated = cut_partial
    if len(lines) > tail:
        lines, truncated = lines[-tail:] if tail else [], True
    return {
        "lines": [scrub_paths(line) for line in lines],
        "offset": offset,
        "size": size,
        "truncated": truncated,
        "reset": reset,
    }
