"""What a replica's load is doing, for ``GET /v1/models/{uid}/progress``: stage, bytes, speed and time left.

The model actor owns one :class:`LoadProgress`; the download thread calls :meth:`LoadProgress.update` with the
bytes done and expected (the hub's progress callback), the actor moves :attr:`LoadProgress.stage` as the load
goes on, and :meth:`LoadProgress.snapshot` is what the worker and the supervisor hand to the API. The speed is
measured over the last few seconds, so a resumed download (its first bytes already on disk) or a stall is
reported as it is now, not averaged since the start.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

__all__ = ["SPEED_WINDOW_S", "LoadProgress"]

#: Seconds of samples the download speed is measured over.
SPEED_WINDOW_S = 5.0


class LoadProgress:
    """Thread-safe: updated from the download thread, read from the actor's event loop."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, int]] = deque()
        self.stage = "locating the weights"
        self.done_bytes = 0
        self.total_bytes = 0

    def update(self, done: int, total: int) -> None:
        now = self._clock()
        with self._lock:
            if done < self.done_bytes:  # a new transfer began (another file set, a retry): start measuring again
                self._samples.clear()
            self.done_bytes, self.total_bytes = done, total
            if 0 < done < total:
                self.stage = "downloading"
            self._samples.append((now, done))
            while len(self._samples) > 2 and now - self._samples[0][0] > SPEED_WINDOW_S:
                self._samples.popleft()

    def snapshot(self) -> dict[str, Any]:
        """``{"stage", "done_bytes", "total_bytes", "bytes_per_second", "eta_seconds"}`` (speed and ETA are None
        until two samples a moment apart exist, or when nothing moves)."""
        with self._lock:
            speed: float | None = None
            if len(self._samples) >= 2:
                (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
                if t1 - t0 > 0.2 and d1 > d0:
                    speed = (d1 - d0) / (t1 - t0)
            left = max(self.total_bytes - self.done_bytes, 0)
            eta = left / speed if speed and self.stage == "downloading" else None
            return {"stage": self.stage, "done_bytes": self.done_bytes, "total_bytes": self.total_bytes,
                    "bytes_per_second": round(speed, 1) if speed else None,
                    "eta_seconds": round(eta, 1) if eta is not None else None}
