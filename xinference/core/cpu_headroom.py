"""Whether the host has CPU to spare: the model actor's stream delivery adapts to it.

Handing a replica's streamed tokens to the API costs a cross-process message and ~0.5-1 ms of Python per round
(both sides together). On a host whose engine leaves cores idle that is free, so every token goes out at once
and the stream is smooth. On a host whose engine already keeps every core busy (llama.cpp on a laptop CPU, with
one thread per core) each round takes that time from the engine: measured on 2 cores, per-token rounds cost
13% of the tokens per second at one stream. There the actor coalesces tokens into fewer rounds.

:class:`CpuHeadroom` answers "is there spare CPU?" from the busy time of the cores this process may use
(``/proc/stat`` through psutil, per CPU in the affinity set) and, under a cgroup v2 quota narrower than those
cores, from the cgroup's own ``cpu.stat`` usage. It samples at most every ``period`` seconds and answers from the
last sample in between, with hysteresis so that the relay's own CPU (which it stops using when it coalesces) does
not make it flip at every sample.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import psutil

from xinference.hardware.host import usable_cpu_count

__all__ = ["CpuHeadroom", "cgroup_usage_seconds"]

#: below this many idle cores (or a quarter of the cores, on a smaller host) the host counts as busy
BUSY_BELOW_CORES = 0.5
#: a busy host counts as having spare CPU again only above this many idle cores (or half of its cores)
SPARE_ABOVE_CORES = 1.0


def cgroup_usage_seconds(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPU seconds used so far by this process's cgroup v2 (``cpu.stat`` ``usage_usec``); ``None`` when unknown."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            stat = root / line[3:].lstrip("/") / "cpu.stat"
            try:
                for row in stat.read_text().splitlines():
                    if row.startswith("usage_usec "):
                        return int(row.split()[1]) / 1e6
            except (OSError, ValueError):
                return None
    return None


def _affinity_busy_seconds() -> Callable[[], float]:
    """A reader of the busy CPU seconds (all but idle and iowait) of the CPUs this process may run on."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []

    def read() -> float:
        times = psutil.cpu_times(percpu=True)
        chosen = [times[i] for i in cpus if i < len(times)] or times
        return float(sum(sum(t) - t.idle - getattr(t, "iowait", 0.0) for t in chosen))

    return read


class CpuHeadroom:
    """Samples how many of this process's usable cores are idle; :meth:`spare` says whether that is enough.

    ``busy_seconds`` reads cumulative busy CPU seconds (tests pass their own); by default the CPUs of this
    process's affinity set, or the cgroup's usage when a quota narrower than them applies.
    """

    def __init__(
        self,
        period: float = 0.5,
        busy_seconds: Callable[[], float] | None = None,
        cores: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period = period
        self._clock = clock
        if busy_seconds is None or cores is None:
            usable = usable_cpu_count()
            try:
                affinity = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                affinity = psutil.cpu_count() or usable
            if usable < affinity and cgroup_usage_seconds() is not None:
                busy_seconds = busy_seconds or (lambda: cgroup_usage_seconds() or 0.0)
            else:
                busy_seconds = busy_seconds or _affinity_busy_seconds()
            cores = cores if cores is not None else float(usable)
        self._busy_seconds = busy_seconds
        self.cores = cores
        self._last_time = clock()
        self._last_busy = busy_seconds()
        self._spare = True
        self._busy_below = min(BUSY_BELOW_CORES, cores / 4)
        self._spare_above = min(SPARE_ABOVE_CORES, cores / 2)
        #: idle cores at the last sample (None until the first sample)
        self.idle_cores: float | None = None

    def spare(self) -> bool:
        """Whether the host has CPU to spare, from a sample at most ``period`` seconds old."""
        now = self._clock()
        elapsed = now - self._last_time
        if elapsed >= self.period and elapsed > 0:
            busy = self._busy_seconds()
            self.idle_cores = max(0.0, self.cores - (busy - self._last_busy) / elapsed)
            self._last_time, self._last_busy = now, busy
            if self._spare and self.idle_cores < self._busy_below:
                self._spare = False
            elif not self._spare and self.idle_cores > self._spare_above:
                self._spare = True
        return self._spare
