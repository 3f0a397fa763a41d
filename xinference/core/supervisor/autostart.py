"""Launch history and autostart: models launched with ``autostart: true`` (``xinference launch --persist``) come
back, with their uid and options, after ``xinference-local`` or the cluster's supervisor restarts.

Every launch that reached ``ready`` is remembered in ``XINFERENCE_HOME/launch_history.json`` (the newest
``MAX_HISTORY``, written atomically): its uid, the launch request as given, when, and whether it autostarts.
Terminating a model turns its autostart off; stopping the server does not. When a worker joins, the supervisor
(after a grace of two heartbeats from its own start, so that workers still running the models re-register them
first) launches every autostart entry that is not running yet (a failure is logged, kept in the history, and tried
again when the next worker joins). ``GET /v1/launch_history`` lists the entries.

The file is read and written on one thread of its own, never on the supervisor's event loop (a rewrite took
15-25 ms of every launch there, ``benchmark/results/scale.md``): changes apply in the order they were made, the ones
made while a write waits share it, and a read queues behind the changes made before it, so it sees them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xinference.core.background import BackgroundTasks
from xinference.core.supervisor.models import ModelTable
from xinference.errors import XinferenceError

__all__ = [
    "MAX_HISTORY",
    "Autostart",
    "Change",
    "History",
    "Launch",
    "LaunchHistory",
    "remember_change",
    "terminate_change",
]

logger = logging.getLogger(__name__)

MAX_HISTORY = 100

#: A change to the history: takes the entries (newest last) and returns them changed.
Change = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


class LaunchHistory:
    """The launch history file: a JSON list, newest last, one entry per model uid."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return (
            [e for e in data if isinstance(e, dict) and isinstance(e.get("model_uid"), str)]
            if isinstance(data, list)
            else []
        )

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries[-MAX_HISTORY:], indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def apply(self, changes: list[Change]) -> None:
        """Read the file once, apply ``changes`` in order, write it once (atomically: a reader sees the old file
        or the new one)."""
        entries = self.entries()
        for change in changes:
            entries = change(entries)
        self._write(entries)

    def remember(self, model_uid: str, request: dict[str, Any], model_engine: str) -> None:
        """A launch reached ``ready``: it replaces any older entry of the same uid."""
        self.apply([remember_change(model_uid, request, model_engine, time.time())])

    def terminated(self, model_uid: str) -> None:
        """The model was terminated on purpose: it stays in the history but no longer autostarts."""
        self.apply([terminate_change(model_uid, time.time())])


def remember_change(model_uid: str, request: dict[str, Any], model_engine: str, at: float) -> Change:
    """The change of a launch that reached ``ready`` at ``at``."""

    def change(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [e for e in entries if e["model_uid"] != model_uid]
        kept.append(
            {
                "model_uid": model_uid,
                "model_name": request.get("model_name"),
                "model_engine": model_engine,
                "autostart": bool(request.get("autostart")),
                "launched_at": at,
                "terminated_at": None,
                "request": {**request, "model_uid": model_uid},
            }
        )
        return kept

    return change


def terminate_change(model_uid: str, at: float) -> Change:
    """The change of a model terminated on purpose at ``at``."""

    def change(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for entry in entries:
            if entry["model_uid"] == model_uid:
                entry["autostart"] = False
                entry["terminated_at"] = at
        return entries

    return change


class _HistoryThread:
    """The one thread that reads and writes launch history files in this process, and the changes waiting for it.

    One thread, not ``asyncio.to_thread``'s shared pool, so two read-modify-writes never interleave and reads and
    writes run in the order they were submitted. Changes made while a write is waiting are folded into it: a burst
    of launches costs one rewrite of the file, not one each (at 1,000 launches in a row, one each kept the thread
    busy for seconds after the burst, on the supervisor's CPU).
    """

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="launch-history")
        self._lock = threading.Lock()
        self._pending: dict[Path, list[Change]] = {}

    def change(self, history: LaunchHistory, change: Change) -> None:
        """Queue ``change``; a write already waiting for the thread takes it, else one is submitted."""
        with self._lock:
            waiting = self._pending.setdefault(history.path, [])
            waiting.append(change)
            if len(waiting) > 1:
                return
        self.executor.submit(self._write, history)

    def _write(self, history: LaunchHistory) -> None:
        with self._lock:
            changes = self._pending.pop(history.path, [])
        try:
            history.apply(changes)
        except OSError as exc:  # the launch or termination itself stands; only its record is lost
            logger.warning("could not write the launch history: %s", exc)
        except Exception:  # noqa: BLE001 - nobody awaits this thread's result, so the log is the only trace
            logger.exception("could not write the launch history")


#: (pid, thread) of this process: made again in a forked child, where the parent's thread does not exist (its
#: executor would queue jobs forever) and its waiting changes are not the child's
_thread: tuple[int, _HistoryThread] | None = None


def _history_thread() -> _HistoryThread:
    """This process's launch history thread."""
    global _thread
    if _thread is None or _thread[0] != os.getpid():
        _thread = (os.getpid(), _HistoryThread())
    return _thread[1]


class History:
    """The launch history as the supervisor keeps it: a launch that reached ``ready`` is remembered and a model
    terminated on purpose stops autostarting, each queued on the history's thread (the caller never waits on the
    disk); reads queue behind the changes made before them."""

    def __init__(self, file: LaunchHistory, models: ModelTable) -> None:
        self._file = file
        self._models = models

    async def entries(self) -> list[dict[str, Any]]:
        """The entries, read on the history's thread after every change submitted before this call."""
        return await asyncio.wrap_future(_history_thread().executor.submit(self._file.entries))

    async def listing(self) -> list[dict[str, Any]]:
        """``GET /v1/launch_history``: newest first, with whether each model runs now."""
        out = []
        for entry in reversed(await self.entries()):
            record = self._models.find(entry["model_uid"])
            out.append({**entry, "status": record.status if record is not None else "not running"})
        return out

    def remember(self, model_uid: str, request: dict[str, Any], model_engine: str) -> None:
        """A launch reached ``ready``: its entry is written on the history's thread; returns at once."""
        request = copy.deepcopy(request)  # as it is now, not when written
        _history_thread().change(self._file, remember_change(model_uid, request, model_engine, time.time()))

    def forget(self, model_uid: str) -> None:
        """A model was terminated on purpose: its autostart goes off on the history's thread; returns at once."""
        _history_thread().change(self._file, terminate_change(model_uid, time.time()))


#: How autostart launches an entry: the supervisor's launch, given the request as it was remembered.
Launch = Callable[[dict[str, Any]], Awaitable[object]]


class Autostart:
    """Launches the autostart entries not running yet, in the background, each time a worker joins.

    ``started`` (monotonic) and ``grace`` (seconds): nothing is launched before ``started + grace``, so that the
    workers still running the models after a supervisor restart re-register them first."""

    def __init__(
        self,
        history: History,
        models: ModelTable,
        background: BackgroundTasks,
        launch: Launch,
        started: float,
        grace: float,
    ) -> None:
        self._history = history
        self._models = models
        self._background = background
        self._launch = launch
        self._started = started
        self._grace = grace
        #: one pass at a time: workers joining together do not launch an entry twice
        self._lock = asyncio.Lock()

    def schedule(self) -> None:
        """Launch the autostart entries not running yet, in the background (called when a worker joins)."""
        self._background.spawn(self.run(), "autostart")

    async def run(self) -> None:
        async with self._lock:
            # after a supervisor restart, the workers that still run the models re-register them within a
            # heartbeat or two: launching before that would start a second copy of each
            wait = self._started + self._grace - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            for entry in await self._history.entries():
                if not entry.get("autostart") or entry["model_uid"] in self._models:
                    continue
                logger.info("autostart: launching %s again", entry["model_uid"])
                try:
                    await self._launch(dict(entry["request"]))
                except XinferenceError as exc:
                    logger.warning("autostart of %s failed: %s", entry["model_uid"], exc.message.splitlines()[0])
                except Exception:  # noqa: BLE001 - one bad entry must not stop the others
                    logger.exception("autostart of %s failed", entry["model_uid"])
