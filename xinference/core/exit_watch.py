"""Has a replica's subprocess ended, and with which exit code? The worker's crash detection asks this every second.

xoscar's main pool keeps its sub pools' process handles in ``sub_processes`` (address -> handle with
``returncode``), which is not public API. :class:`ExitWatch` is the one place that reads it; when a future xoscar
drops the attribute, it logs that once at WARNING and falls back to the process id the model actor reported
(psutil: a process that is gone, or a zombie child, has ended).
"""

from __future__ import annotations

import logging
from typing import Any

import psutil

__all__ = ["UNKNOWN_EXIT", "ExitWatch"]

logger = logging.getLogger(__name__)

#: The exit code reported for a process that ended when its real code cannot be read.
UNKNOWN_EXIT = -1


class ExitWatch:
    """Exit codes of the sub pools of one xoscar main pool; ``exit_code`` is None while the process runs."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._warned = False

    def exit_code(self, address: str, pid: int | None = None) -> int | None:
        """The exit code of the sub pool at ``address`` (``pid``: its process id, used only without xoscar's
        table), or None while it runs or when nothing is known about it."""
        table = getattr(self._pool, "sub_processes", None)
        if isinstance(table, dict):
            code = getattr(table.get(address), "returncode", None)
            return code if isinstance(code, int) else None
        if not self._warned:
            self._warned = True
            logger.warning(
                "this xoscar's main pool has no sub_processes table; a replica's death is detected by "
                "its process id instead (exit codes may read %d)",
                UNKNOWN_EXIT,
            )
        return self._by_pid(pid)

    @staticmethod
    def _by_pid(pid: int | None) -> int | None:
        if pid is None:
            return None
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                return None
            try:
                code = process.wait(timeout=0)  # our own child: reaping it gives its code
            except psutil.TimeoutExpired:
                return UNKNOWN_EXIT
            return code if isinstance(code, int) else UNKNOWN_EXIT
        except psutil.NoSuchProcess:
            return UNKNOWN_EXIT
        except psutil.Error:  # AccessDenied: it exists, so it runs
            return None
