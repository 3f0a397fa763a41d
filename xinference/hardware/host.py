"""The host probe: operating system, CPU architecture, usable CPU cores and RAM, and the Apple chip's name.

Every function but :func:`apple_chip_name` reads the machine afresh (a few small file reads, no subprocess);
``detect_hardware`` calls them on each heartbeat. The CPU count honours CPU affinity and cgroup v1/v2 quotas,
so a worker in a container reports the cores it may really use.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import psutil

__all__ = [
    "apple_chip_name",
    "normalize_arch",
    "parse_cgroup_cpu_max",
    "read_ram",
    "system_and_arch",
    "usable_cpu_count",
]

logger = logging.getLogger(__name__)

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def system_and_arch() -> tuple[str, str]:
    """``("linux", "x86_64")``-style names of this machine (see ``HardwareInfo.os`` / ``arch``)."""
    return platform.system().lower() or "unknown", normalize_arch(platform.machine())


def normalize_arch(machine: str) -> str:
    """A machine type with its aliases folded: ``AMD64`` -> ``x86_64``, ``aarch64`` -> ``arm64``."""
    lowered = machine.strip().lower()
    return _ARCH_ALIASES.get(lowered, lowered) or "unknown"


def read_ram() -> tuple[int, int]:
    """``(total, available)`` RAM in bytes, as the OS reports them now."""
    memory = psutil.virtual_memory()
    return int(memory.total), int(memory.available)


def parse_cgroup_cpu_max(text: str) -> int | None:
    """Whole cores allowed by a cgroup v2 ``cpu.max`` file (``"<quota> <period>"``), rounded up; ``None``
    when there is no quota (``"max ..."``) or the text is not understood.

    ``"150000 100000"`` (1.5 cores) gives 2: a fractional core still runs a thread.
    """
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    return _cores_from_quota(quota, period)


def usable_cpu_count() -> int:
    """The cores this process may run on: its CPU affinity, capped by the tightest cgroup quota (Linux)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    if sys.platform.startswith("linux"):
        limit = _cgroup_cpu_limit()
        if limit is not None:
            count = min(count, limit)
    return max(1, count)


@functools.cache
def apple_chip_name() -> str:
    """E.g. ``"Apple M2 Pro"``; a generic name when ``sysctl`` cannot tell. Asked once per process (the chip
    does not change), so the heartbeat starts no ``sysctl``."""
    sysctl = shutil.which("sysctl") or "/usr/sbin/sysctl"
    try:
        completed = subprocess.run(
            [sysctl, "-n", "machdep.cpu.brand_string"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("sysctl could not name the Apple chip: %s", exc)
        return "Apple silicon GPU"
    name = completed.stdout.strip() if completed.returncode == 0 else ""
    return name or "Apple silicon GPU"


def _cores_from_quota(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return max(1, -(-quota // period))


def _read_small(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_v2_dirs() -> list[Path]:
    """This process's cgroup v2 directory and its ancestors (a quota on any of them applies)."""
    dirs = [_CGROUP_ROOT]
    for line in (_read_small(Path("/proc/self/cgroup")) or "").splitlines():
        if not line.startswith("0::"):
            continue
        relative = PurePosixPath(line[3:].strip())
        parts = [part for part in relative.parts if part != "/"]
        if ".." in parts:
            break
        for depth in range(len(parts), 0, -1):
            dirs.append(_CGROUP_ROOT.joinpath(*parts[:depth]))
    return dirs


def _cgroup_cpu_limit() -> int | None:
    """The tightest CPU quota of cgroup v2 (``cpu.max``) or v1 (``cpu.cfs_quota_us``), in whole cores."""
    limits: list[int] = []
    for directory in _cgroup_v2_dirs():
        text = _read_small(directory / "cpu.max")
        limit = parse_cgroup_cpu_max(text) if text is not None else None
        if limit is not None:
            limits.append(limit)
    for directory in (_CGROUP_ROOT / "cpu", _CGROUP_ROOT / "cpu,cpuacct"):
        quota, period = _read_small(directory / "cpu.cfs_quota_us"), _read_small(directory / "cpu.cfs_period_us")
        if quota is None or period is None:
            continue
        try:
            limit = _cores_from_quota(int(quota), int(period))
        except ValueError:
            continue
        if limit is not None:
            limits.append(limit)
    return min(limits, default=None)
