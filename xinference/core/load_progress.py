"""What a replica's load is doing, for ``GET /v1/models/{uid}/progress``: stage, bytes, speed and time left,
overall and per file.

The model actor owns one :class:`LoadProgress`; the download thread calls :meth:`LoadProgress.update` with the
bytes done and expected (the hub's progress callback) and :meth:`LoadProgress.update_file` per file, the actor
moves :attr:`LoadProgress.stage` as the load goes on, and :meth:`LoadProgress.snapshot` is what the worker and the
supervisor hand to the API. Speeds are measured over the last few seconds, so a resumed download (its first
bytes already on disk) or a stall is reported as it is now, not averaged since the start.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

__all__ = ["MAX_FILES", "SPEED_WINDOW_S", "LoadProgress"]

#: Seconds of samples a download speed is measured over.
SPEED_WINDOW_S = 5.0
#: Files listed in a snapshot (the most recently active first); a snapshot download has a handful.
MAX_FILES = 32


class _Rate:
    """Bytes done against time, over the last :data:`SPEED_WINDOW_S` seconds."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.done = 0
        self.total: int | None = 0

    def add(self, now: float, done: int, total: int | None) -> None:
        if done < self.done:  # a new transfer began (another file set, a retry): measure again
            self.samples.clear()
        self.done, self.total = done, total
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > SPEED_WINDOW_S:
            self.samples.popleft()

    def speed(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 - t0 > 0.2 and d1 > d0 else None

    def view(self, moving: bool) -> dict[str, Any]:
        speed = self.speed()
        left = max((self.total or 0) - self.done, 0)
        eta = left / speed if speed and moving and self.total else None
        return {
            "done_bytes": self.done,
            "total_bytes": self.total,
            "bytes_per_second": round(speed, 1) if speed else None,
            "eta_seconds": round(eta, 1) if eta is not None else None,
        }


class LoadProgress:
    """Thread-safe: updated from the download thread, read from the actor's event loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._all = _Rate()
        self._files: dict[str, _Rate] = {}
        self.stage = "locating the weights"

    @property
    def done_bytes(self) -> int:
        return self._all.done

    def update(self, done: int, total: int) -> None:
        with self._lock:
            self._all.add(self._clock(), done, total)
            if 0 < done < total:
                self.stage = "downloading"

    def update_file(self, name: str, done: int, size: int | None) -> None:
        with self._lock:
            rate = self._files.pop(name, None) or _Rate()
            rate.add(self._clock(), done, size)
            self._files[name] = rate  # re-inserted: the most recently active file is last

    def snapshot(self) -> dict[str, Any]:
        """``{"stage", "done_bytes", "total_bytes", "bytes_per_second", "eta_seconds", "files"}``; speed and
        time left are None until two samples a moment apart exist, or when nothing moves. ``files`` lists each file
        transferred by this load: ``{"name", "done_bytes", "total_bytes", "bytes_per_second", "eta_seconds"}``."""
        with self._lock:
            downloading = self.stage == "downloading"
            view = self._all.view(downloading)
            files = list(self._files.items())[-MAX_FILES:]
            view["files"] = [
                {"name": name, **rate.view(downloading and rate.done != rate.total)} for name, rate in reversed(files)
            ]
            return {"stage": self.stage, **view}
