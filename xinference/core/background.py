"""Background work of the long-lived actors (supervisor, worker): tasks that are kept and whose failure is logged,
and failures that last logged once at WARNING instead of at every retry.

``asyncio`` keeps only a weak reference to a task, so a task created and dropped may be collected before it ends,
and its exception is reported (if ever) only when it is garbage-collected. :class:`BackgroundTasks` holds every
task until it ends and logs its failure at once. :class:`FailureStreak` is for loops that retry every few seconds
(heartbeats, reports to the supervisor): one failure may be a blip (DEBUG), a second in a row is a lasting problem
(one WARNING), and the recovery is an INFO line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundTasks", "FailureStreak"]

T = TypeVar("T")


class BackgroundTasks:
    """The tasks one actor started and does not await. ``spawn`` keeps a reference until the task ends and logs
    an exception it ended with at WARNING on ``logger``; ``cancel_all`` is for the actor's teardown."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task named ``name`` (the name is what a failure is logged with)."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._logger.warning(
                "background task %s failed: %s: %s", task.get_name(), type(exc).__name__, exc, exc_info=exc
            )

    def __len__(self) -> int:
        return len(self._tasks)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class FailureStreak:
    """Failures in a row of one repeated action (``what``): the first is logged at DEBUG, the second at WARNING,
    later ones at DEBUG again until ``succeeded`` ends the streak (logged at INFO when it had been warned about)."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self.count = 0

    def failed(self, exc: BaseException) -> None:
        self.count += 1
        level = logging.WARNING if self.count == 2 else logging.DEBUG
        self._logger.log(
            level, "%s failed (%d time(s) in a row): %s: %s", self._what, self.count, type(exc).__name__, exc
        )

    def succeeded(self) -> None:
        if self.count >= 2:
            self._logger.info("%s works again after %d failure(s)", self._what, self.count)
        self.count = 0
