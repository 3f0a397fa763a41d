"""The last words of a process's log, safe to send off the machine: what a failed launch or a dead replica's
error carries (local paths shortened to file names).

A leaf: the worker, the log reader and the managed engines' runner all use it, and it imports nothing of theirs.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

__all__ = ["LOG_TAIL_LINES", "log_tail", "scrub_paths"]

LOG_TAIL_LINES = 15
_ABS_PATH = re.compile(r"(?<![\w.])(/[^\s:'\"()\[\],]+)+")


def scrub_paths(text: str) -> str:
    """Replace absolute local paths by their last component: error texts leave the machine, paths should not."""
    return _ABS_PATH.sub(lambda m: ".../" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of a model log, paths scrubbed; empty when there is no log."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            tail = deque((line.rstrip() for line in handle if line.strip()), maxlen=lines)
    except OSError:
        return ""
    return scrub_paths("\n".join(tail))
