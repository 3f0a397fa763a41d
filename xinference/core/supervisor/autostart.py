"""Launch history and autostart: models launched with ``autostart: true`` (``xinference launch --persist``) come
back, with their uid and options, after ``xinference-local`` or the cluster's supervisor restarts.

Every launch that reached ``ready`` is remembered in ``XINFERENCE_HOME/launch_history.json`` (the newest
``MAX_HISTORY``, written atomically): its uid, the launch request as given, when, and whether it autostarts.
Terminating a model turns its autostart off; stopping the server does not. When a worker joins, the supervisor
launches every autostart entry that is not running yet (a failure is logged, kept in the history, and tried
again when the next worker joins). ``GET /v1/launch_history`` lists the entries.

The file is read and written on one thread of its own, never on the supervisor's event loop (a rewrite took
15-25 ms of every launch there, ``benchmark/results/scale.md``): changes run in the order they were made, and a read
queues behind the changes made before it, so it sees them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xinference import settings
from xinference.core.background import BackgroundTasks
from xinference.errors import XinferenceError

__all__ = ["MAX_HISTORY", "AutostartMixin", "LaunchHistory"]

logger = logging.getLogger(__name__)

MAX_HISTORY = 100

#: (pid, executor) of the one thread that touches launch history files in this process
_file_thread: tuple[int, ThreadPoolExecutor] | None = None


def _history_thread() -> ThreadPoolExecutor:
    """The one thread that reads and writes launch history files. One thread, not ``asyncio.to_thread``'s shared
    pool, so the read-modify-writes of two changes never interleave and land in the order they were submitted. Made
    again in a forked child, where the parent's thread does not exist (its executor would queue jobs forever)."""
    global _file_thread
    if _file_thread is None or _file_thread[0] != os.getpid():
        _file_thread = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="launch-history"))
    return _file_thread[1]


class LaunchHistory:
    """The launch history file: a JSON list, newest last, one entry per model uid."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [e for e in data if isinstance(e, dict) and isinstance(e.get("model_uid"), str)] \
            if isinstance(data, list) else []

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries[-MAX_HISTORY:], indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def remember(self, model_uid: str, request: dict[str, Any], model_engine: str) -> None:
        """A launch reached ``ready``: it replaces any older entry of the same uid."""
        entries = [e for e in self.entries() if e["model_uid"] != model_uid]
        entries.append({"model_uid": model_uid, "model_name": request.get("model_name"),
                        "model_engine": model_engine, "autostart": bool(request.get("autostart")),
                        "launched_at": time.time(), "terminated_at": None,
                        "request": {**request, "model_uid": model_uid}})
        self._write(entries)

    def terminated(self, model_uid: str) -> None:
        """The model was terminated on purpose: it stays in the history but no longer autostarts."""
        entries = self.entries()
        for entry in entries:
            if entry["model_uid"] == model_uid:
                entry["autostart"] = False
                entry["terminated_at"] = time.time()
        self._write(entries)


class AutostartMixin:
    """Needs SupervisorActor's ``_models`` and ``launch_model``."""

    _models: dict[str, Any]

    def _history(self) -> LaunchHistory:
        return LaunchHistory(settings.home_dir() / "launch_history.json")

    async def _history_entries(self) -> list[dict[str, Any]]:
        """The entries, read on the history's thread after every change submitted before this call."""
        history = self._history()
        return await asyncio.wrap_future(_history_thread().submit(history.entries))

    async def launch_history(self) -> list[dict[str, Any]]:
        """``GET /v1/launch_history``: newest first, with whether each model runs now."""
        out = []
        for entry in reversed(await self._history_entries()):
            record = self._models.get(entry["model_uid"])
            out.append({**entry, "status": record.status if record is not None else "not running"})
        return out

    def _remember_launch(self, model_uid: str, request: dict[str, Any], model_engine: str) -> None:
        """A launch reached ``ready``: its entry is written on the history's thread; returns at once."""
        history, request = self._history(), copy.deepcopy(request)  # as it is now, not when written
        _submit_change(lambda: history.remember(model_uid, request, model_engine))

    def _forget_autostart(self, model_uid: str) -> None:
        """A model was terminated on purpose: its autostart goes off on the history's thread; returns at once."""
        history = self._history()
        _submit_change(lambda: history.terminated(model_uid))

    def _schedule_autostart(self) -> None:
        """Launch the autostart entries not running yet, in the background (called when a worker joins)."""
        lock: asyncio.Lock | None = getattr(self, "_autostart_lock", None)
        if lock is None:
            lock = self._autostart_lock = asyncio.Lock()
        tasks: BackgroundTasks = self._background  # type: ignore[attr-defined]
        tasks.spawn(self._autostart(lock), "autostart")

    async def _autostart(self, lock: asyncio.Lock) -> None:
        async with lock:
            for entry in await self._history_entries():
                if not entry.get("autostart") or entry["model_uid"] in self._models:
                    continue
                logger.info("autostart: launching %s again", entry["model_uid"])
                try:
                    await self.launch_model(dict(entry["request"]), wait_ready=True)  # type: ignore[attr-defined]
                except XinferenceError as exc:
                    logger.warning("autostart of %s failed: %s", entry["model_uid"], exc.message.splitlines()[0])
                except Exception:  # noqa: BLE001 - one bad entry must not stop the others
                    logger.exception("autostart of %s failed", entry["model_uid"])


def _submit_change(change: Callable[[], None]) -> None:
    """Run ``change`` on the history's thread after the changes submitted before it. A failure is logged there:
    the launch or termination that asked for it has already happened and stands."""

    def run() -> None:
        try:
            change()
        except OSError as exc:
            logger.warning("could not write the launch history: %s", exc)
        except Exception:  # noqa: BLE001 - nobody awaits this thread's result, so the log is the only trace
            logger.exception("could not write the launch history")

    _history_thread().submit(run)
