"""The worker's process handling without real subprocesses: a cancelled removal stays cancelled, a lasting
heartbeat failure warns once, and crash detection reads xoscar's table or falls back to the process id."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from tests.core.plans import replica_plan
from tests.machines import linux
from xinference.core.exit_watch import UNKNOWN_EXIT, ExitWatch
from xinference.core.launch import LaunchPlan
from xinference.core.worker import WorkerActor, _Replica
from xinference.core.worker import actor as worker_module


def _plan(model_uid: str = "m", replica_uid: str = "m-0", **fields: Any) -> LaunchPlan:
    return LaunchPlan(
        model_uid=model_uid,
        replica_uid=replica_uid,
        model_engine="llama.cpp",
        family={},
        spec={},
        quantization="Q4_0",
        engine_config={},
        **fields,
    )


class _SlowPool:
    """A main pool whose sub pool removal takes a while; records what was removed."""

    def __init__(self) -> None:
        self.sub_processes: dict[str, Any] = {"sub:1": SimpleNamespace(returncode=None)}
        self.removed: list[str] = []
        self.removing = asyncio.Event()

    async def remove_sub_pool(self, address: str, timeout: float, force: bool) -> None:
        self.removed.append(address)
        self.removing.set()


def test_a_cancelled_removal_still_ends_the_process_and_stays_cancelled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pool = _SlowPool()
    worker = WorkerActor(main_pool=pool)
    unloading = asyncio.Event()

    async def model_ref(address: str) -> str:
        return address

    async def slow_destroy(ref: Any) -> None:
        unloading.set()
        await asyncio.sleep(60)  # an engine that takes long to unload

    monkeypatch.setattr(worker, "_model_ref", model_ref)
    monkeypatch.setattr(worker_module.xo, "destroy_actor", slow_destroy)
    replica = _Replica("m-0", "sub:1", tmp_path / "m-0.log", _plan())

    async def scenario() -> asyncio.Task[None]:
        task = asyncio.create_task(worker._remove_process(replica))
        await unloading.wait()
        task.cancel()
        await asyncio.wait([task])
        return task

    task = asyncio.run(scenario())
    assert task.cancelled()  # before the fix the CancelledError was logged at DEBUG and the task ended normally
    assert pool.removed == ["sub:1"]


class _DownSupervisor:
    def __init__(self) -> None:
        self.calls = 0

    async def heartbeat(self, address: str, hardware: dict[str, Any]) -> bool:
        self.calls += 1
        raise ConnectionError("supervisor unreachable")


def test_a_lasting_heartbeat_failure_is_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XINFERENCE_HEARTBEAT_INTERVAL", "0.001")
    worker = WorkerActor(main_pool=object())
    supervisor = worker._supervisor = _DownSupervisor()

    async def hardware() -> dict[str, Any]:
        return linux().model_dump(mode="json")

    monkeypatch.setattr(worker, "hardware", hardware)

    async def scenario() -> None:
        beats = asyncio.create_task(worker._heartbeat())
        while supervisor.calls < 8:
            await asyncio.sleep(0.005)
        beats.cancel()
        await asyncio.wait([beats])

    with caplog.at_level(logging.DEBUG, logger="xinference.core.worker"):
        asyncio.run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "heartbeat to the supervisor failed (2 time(s) in a row)" in warnings[0]
    assert worker._heartbeats.count >= 8


# -- crash detection -----------------------------------------------------------------------------------------


def test_exit_codes_come_from_xoscars_table_when_it_has_one(caplog: pytest.LogCaptureFixture) -> None:
    pool = SimpleNamespace(sub_processes={"a": SimpleNamespace(returncode=None), "b": SimpleNamespace(returncode=-9)})
    watch = ExitWatch(pool)
    with caplog.at_level(logging.WARNING):
        assert watch.exit_code("a", pid=1) is None
        assert watch.exit_code("b") == -9
        assert watch.exit_code("gone") is None
    assert caplog.records == []


def test_without_the_table_the_pid_decides_and_a_warning_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    watch = ExitWatch(object())
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    for _ in range(500):  # until it is a zombie (not reaped: Popen.wait is never called)
        if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.01)
    with caplog.at_level(logging.WARNING, logger="xinference.core.exit_watch"):
        assert watch.exit_code("sub:1", os.getpid()) is None  # running
        assert watch.exit_code("sub:2", None) is None  # nothing known
        assert watch.exit_code("sub:3", child.pid) == 3  # our child ended: its code, and it is reaped
        assert watch.exit_code("sub:3", child.pid) == UNKNOWN_EXIT  # gone now
    assert len(caplog.records) == 1 and "no sub_processes table" in caplog.records[0].getMessage()


class _StartingPool:
    """A main pool whose new sub pool takes until ``started`` is set (a process starting, Python importing)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.appending = asyncio.Event()
        self.removed: list[str] = []
        self.sub_processes: dict[str, Any] = {}

    async def append_sub_pool(self, **_: Any) -> str:
        self.appending.set()
        await self.started.wait()
        return "sub:9"

    async def remove_sub_pool(self, address: str, timeout: float, force: bool) -> None:
        self.removed.append(address)


def test_a_cancel_before_the_model_process_exists_stops_the_launch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cancel that came while the replica's process was still starting found no model actor and was dropped:
    the model actor was created and its load (the download) ran on."""
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    pool = _StartingPool()
    worker = WorkerActor(main_pool=pool)
    created: list[str] = []

    async def create_actor(*args: Any, **kwargs: Any) -> Any:
        created.append(kwargs["address"])
        raise AssertionError("the model actor must not be created after a cancel")

    monkeypatch.setattr(worker_module.xo, "create_actor", create_actor)
    plan = replica_plan()

    async def scenario() -> BaseException | None:
        launch = asyncio.create_task(worker.launch_replica(plan))
        await pool.appending.wait()
        await worker.cancel_launch("m-0")
        pool.started.set()
        try:
            await launch
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            return exc
        return None

    outcome = asyncio.run(scenario())
    assert outcome is not None and "was cancelled" in str(outcome)
    assert created == [] and pool.removed == ["sub:9"]
    assert worker._replicas == {}


@pytest.mark.parametrize(("served", "restarted"), [(31.0, True), (5.0, False)])
def test_a_replica_that_served_a_while_gets_its_restart_budget_back(
    served: float, restarted: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The budget counted every restart of a replica's life: a replica killed a 4th time, days apart, was given up
    on (found by the chaos soak). Now only restarts in a row count, as a crash loop makes them."""
    monkeypatch.setenv("XINFERENCE_MODEL_RESTARTS", "3")
    worker = WorkerActor(main_pool=_SlowPool())
    told: list[tuple[Any, ...]] = []
    spawned: list[str] = []

    class Reports:
        """Stands in for the supervisor: records the reports the worker makes."""

        async def replica_failed(self, *args: Any) -> None:
            told.append(("replica_failed", *args))

        async def replica_restarted(self, *args: Any) -> None:
            told.append(("replica_restarted", *args))

    async def tell(call: Any) -> Any:
        return await call(Reports())

    async def spawn(replica: _Replica) -> None:
        spawned.append(replica.replica_uid)

    async def remove(replica: _Replica, why: str | None = None) -> None:
        return None

    monkeypatch.setattr(worker, "_tell_supervisor", tell)
    monkeypatch.setattr(worker, "_spawn", spawn)
    monkeypatch.setattr(worker, "_remove_process", remove)
    replica = _Replica("m-0", "sub:1", tmp_path / "m-0.log", _plan(), restarts=3)
    worker._replicas["m-0"] = replica

    async def scenario() -> None:
        replica.serving_since = asyncio.get_running_loop().time() - served
        await worker._recover(replica, -9)

    asyncio.run(scenario())
    assert (spawned == ["m-0"]) is restarted
    assert any("gave up" in str(t) for t in told) is not restarted
