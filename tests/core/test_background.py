"""Background tasks are kept until they end and their failures logged; lasting failures warn once."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from xinference.core.background import BackgroundTasks, FailureStreak

LOG = logging.getLogger("tests.background")


def test_a_spawned_task_is_kept_until_it_ends_and_its_failure_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        tasks = BackgroundTasks(LOG)
        gate = asyncio.Event()

        async def work() -> None:
            await gate.wait()
            raise RuntimeError("disk full")

        tasks.spawn(work(), "save-state")
        gc.collect()
        assert len(tasks) == 1  # held by the set, not only by the loop's weak reference
        gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(tasks) == 0

    with caplog.at_level(logging.DEBUG, logger="tests.background"):
        asyncio.run(scenario())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["background task save-state failed: RuntimeError: disk full"]


def test_cancelled_tasks_are_not_failures(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        tasks = BackgroundTasks(LOG)
        task = tasks.spawn(asyncio.sleep(60), "sleeper")
        await asyncio.sleep(0)
        tasks.cancel_all()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(tasks) == 0

    with caplog.at_level(logging.DEBUG, logger="tests.background"):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_lasting_failure_warns_once_and_its_recovery_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    streak = FailureStreak(LOG, "heartbeat to the supervisor")
    with caplog.at_level(logging.DEBUG, logger="tests.background"):
        for _ in range(6):
            streak.failed(ConnectionError("refused"))
        streak.succeeded()
        streak.failed(ConnectionError("refused"))  # a single blip after the recovery: DEBUG only
        streak.succeeded()
    levels = [r.levelno for r in caplog.records]
    assert levels.count(logging.WARNING) == 1
    assert caplog.records[1].levelno == logging.WARNING and "2 time(s) in a row" in caplog.records[1].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "heartbeat to the supervisor works again after 6 failure(s)"
    ]
    assert streak.count == 0
