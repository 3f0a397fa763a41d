"""A managed engine server as a child process group that never outlives its model process.

Used by :mod:`xinference.engines.managed.engine`. The server runs in a session (process group) of its own, so the whole
group can be signalled; its output goes to the model's log. A watchdog process (our Python, no imports beyond
psutil) holds the read end of a pipe whose write end only the model process has: when the model process disappears
for any reason, kill -9 included, the pipe closes and the watchdog stops the group and every descendant it has
seen (vLLM spawns its engine core and workers itself, which a parent-death signal on the server would not reach).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xinference.errors import LaunchFailed

__all__ = ["ServerProcess", "free_loopback_port", "root_cause", "scrub"]

logger = logging.getLogger(__name__)

#: Environment variable the worker sets for a model process: where its stdout/stderr go (see core.model_actor).
_MODEL_LOG_ENV = "XINFERENCE_MODEL_LOG"
_TAIL_BYTES = 16384
#: how much of a server's log (since it started) :meth:`ServerProcess.root_cause` reads, from the end
_CAUSE_BYTES = 4 * 1024 * 1024
#: what a server's logger puts before a message: vLLM's ``(EngineCore pid=12) ERROR 12-03 08:13:20 [core.py:1510] ``,
#: SGLang's ``[2025-01-01 12:00:00 TP0] ``
_LOG_PREFIX = re.compile(
    r"^(?:\([^()]*\)\s*)?"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s*)?"
    r"(?:\[[^\]]*\]\s*)*"
)
#: the last line of a Python traceback: ``ValueError: ...``, ``torch.OutOfMemoryError: ...``, a bare name
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?:(?:[A-Z]\w*)?(?:Error|Exception)|KeyboardInterrupt|SystemExit)(?::\s.*|:?)$"
)
#: exceptions that only point elsewhere ("Engine core initialization failed. See root cause above.")
_POINTER = re.compile(r"see (?:the )?(?:root cause|stack trace|above|logs?\b)|for (?:the )?root cause", re.IGNORECASE)

# The watchdog: started with our own Python, stdin is the read end of a pipe whose write end only the model
# process holds. EOF (the model process closed it or died) -> stop the server's group and every descendant seen.
_WATCHDOG = r"""
import os, select, signal, sys, time
import psutil
leader, grace = int(sys.argv[1]), float(sys.argv[2])
seen = {}
def remember():
    try:
        root = psutil.Process(leader)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return
    for proc in procs:
        seen.setdefault(proc.pid, proc)
def group_alive():
    try:
        os.killpg(leader, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
def running():
    return [p for p in seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
def stop():
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(leader, sig)
        except OSError:
            pass
        for proc in running():
            try:
                proc.send_signal(sig)
            except psutil.Error:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (group_alive() or running()):
            time.sleep(0.1)
def _leave(*_):
    raise SystemExit(0)
signal.signal(signal.SIGTERM, _leave)
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    while group_alive():
        remember()
        ready = select.select([0], [], [], 1.0)[0]
        if ready and not os.read(0, 4096):
            break
finally:
    stop()
"""


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 right now (the server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def root_cause(text: str, limit: int = 600) -> str | None:
    """The first exception line of a server's log (``ValueError: Available memory on node 0 ...``), its logger's
    prefix removed, at most ``limit`` characters; None when there is none. Why the first: an engine that dies in a
    child process (vLLM's worker) logs the real error there, and its parents then end with exceptions that only
    point back to it ("Engine core initialization failed. See root cause above"); those count only when nothing
    else was raised."""
    pointer: str | None = None
    for raw in text.splitlines():
        line = _LOG_PREFIX.sub("", raw.strip(), count=1).strip()
        if not _EXCEPTION_LINE.match(line):
            continue
        if not _POINTER.search(line):
            return line[:limit]
        pointer = pointer or line[:limit]
    return pointer


def scrub(text: str) -> str:
    """``text`` with local paths shortened to their last component (what leaves the machine)."""
    from xinference.logtail import scrub_paths

    return scrub_paths(text)


class ServerProcess:
    """One engine server as a child process group, with its watchdog; see the module docstring.

    ``log_path``: where the server's output goes; by default the model's log (``XINFERENCE_MODEL_LOG``, the file
    the model process's own fds 1/2 write to), else a temporary file removed on ``stop``.
    """

    def __init__(
        self,
        label: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path | None = None,
        stop_grace_s: float = 8.0,
    ) -> None:
        self.label = label
        self.argv = list(argv)
        self.env = dict(env)
        self.stop_grace_s = stop_grace_s
        given = log_path or (Path(os.environ[_MODEL_LOG_ENV]) if os.environ.get(_MODEL_LOG_ENV) else None)
        self._own_log = given is None
        if given is None:
            handle, name = tempfile.mkstemp(prefix="xinference-server-", suffix=".log")
            os.close(handle)
            given = Path(name)
        self.log_path = given
        self._log_start = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._pipe_w: int | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def returncode(self) -> int | None:
        """The server's exit code once it has exited (reaping it), else None."""
        return self.process.poll() if self.process is not None else None

    def start(self) -> None:
        """Start the server in a new session (its own process group) and the watchdog that outlives us."""
        try:
            self._log_start = self.log_path.stat().st_size
        except OSError:
            self._log_start = 0
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchFailed(f"could not start {self.label}: {exc}") from exc
        finally:
            os.close(fd)
        read_end, self._pipe_w = os.pipe()  # both non-inheritable: only the watchdog gets the read end, as stdin
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(self.process.pid), str(self.stop_grace_s)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            os.close(read_end)
        logger.info("%s started (pid %d): %s", self.label, self.process.pid, " ".join(self._shown_argv()))

    def _shown_argv(self) -> list[str]:
        shown = list(self.argv)
        for i, arg in enumerate(shown[:-1]):
            if arg == "--api-key":
                shown[i + 1] = "***"
        return shown

    def tail(self, lines: int = 3) -> str:
        """The last ``lines`` non-empty lines the server wrote (since it started), paths scrubbed."""
        try:
            with self.log_path.open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                start = max(self._log_start, size - _TAIL_BYTES)
                handle.seek(start)
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        kept = [line.rstrip() for line in text.splitlines() if line.strip()]
        return scrub("\n".join(kept[-lines:]))

    def root_cause(self) -> str | None:
        """:func:`root_cause` of what the server wrote since it started (its last 4 MiB), paths scrubbed."""
        try:
            with self.log_path.open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(self._log_start, size - _CAUSE_BYTES))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        found = root_cause(text)
        return scrub(found) if found else None

    def _group(self) -> list[Any]:
        """The server and every descendant alive now (psutil processes)."""
        import psutil

        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    async def stop(self) -> None:
        """SIGTERM to the group, SIGKILL to whatever is left after ``stop_grace_s``; then release the watchdog.
        Never raises."""
        import psutil

        process = self.process
        if process is not None:
            members = self._group()
            for sig, wait in ((signal.SIGTERM, self.stop_grace_s), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, sig)
                for member in members:
                    with contextlib.suppress(psutil.Error):
                        member.send_signal(sig)
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline:
                    process.poll()
                    if not _any_alive(process.pid, members):
                        break
                    await asyncio.sleep(0.1)
                if not _any_alive(process.pid, members):
                    break
                logger.warning("%s did not stop within %.0fs of %s", self.label, wait, sig.name)
            process.poll()
        if self._pipe_w is not None:
            os.close(self._pipe_w)  # the watchdog sees EOF, finds nothing left and exits
            self._pipe_w = None
        if self.watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.watchdog.wait, 10)
        if self._own_log:
            self.log_path.unlink(missing_ok=True)


def _any_alive(leader: int, members: list[Any]) -> bool:
    import psutil

    try:
        os.killpg(leader, 0)
        return True
    except ProcessLookupError:
        pass
    except PermissionError:
        return True
    for member in members:
        with contextlib.suppress(psutil.Error):
            if member.is_running() and member.status() != psutil.STATUS_ZOMBIE:
                return True
    return False
