"""The worker's side of a launch, without real subprocesses: the plan reaches the model actor as a LaunchPlan,
the saved state stays JSON, the engine class is looked up once per replica, and one status call carries the
replica's progress.

Test doubles (named so): ``_StandInPool`` for xoscar's main pool, ``_StandInModelActor`` for the model actor's
reference (its calls are counted); the worker itself is the real class.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.core.plans import replica_plan
from tests.machines import linux
from xinference.core.launch import LaunchPlan
from xinference.core.worker import WorkerActor
from xinference.core.worker import actor as worker_module
from xinference.core.worker import replica as worker_replica
from xinference.engines.base import Engine


class _StandInPool:
    """A main pool whose sub pools are names: ``sub:1``, ``sub:2``..."""

    def __init__(self) -> None:
        self.sub_processes: dict[str, Any] = {}
        self.appended = 0

    async def append_sub_pool(self, **_: Any) -> str:
        self.appended += 1
        return f"sub:{self.appended}"

    async def remove_sub_pool(self, address: str, timeout: float, force: bool) -> None:
        return None


class _StandInModelActor:
    """Answers the worker's calls to a model actor and counts them."""

    def __init__(self, progress: float = 0.25) -> None:
        self.calls: dict[str, int] = {}
        self._progress = progress

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    async def load(self) -> dict[str, Any]:
        self._count("load")
        return {"pid": 4242, "engine_config": {}}

    async def load_status(self) -> dict[str, Any]:
        self._count("load_status")
        return {
            "stage": "downloading",
            "done_bytes": 25,
            "total_bytes": 100,
            "bytes_per_second": None,
            "eta_seconds": None,
            "files": [],
            "progress": self._progress,
        }

    async def progress(self) -> float:
        self._count("progress")
        return self._progress


def _plan(**changes: Any) -> LaunchPlan:
    return replica_plan(**{"engine_config": {"n_ctx": 512}, "launch_id": "L1", **changes})


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[Any, ...]]:
    """Every ``xo.create_actor`` call the worker makes (class and arguments); each returns a stand-in."""
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    calls: list[tuple[Any, ...]] = []

    async def create_actor(cls: type, *args: Any, **kwargs: Any) -> _StandInModelActor:
        calls.append((cls, *args))
        return _StandInModelActor()

    monkeypatch.setattr(worker_module.xo, "create_actor", create_actor)
    return calls


@pytest.mark.parametrize("sent_as", ["plan", "dict"])
def test_the_model_actor_gets_the_plan_as_a_launch_plan(sent_as: str, created: list[tuple[Any, ...]]) -> None:
    """The plan crosses to the model process as the dataclass, whether the supervisor sent a LaunchPlan or (as it
    did before) its dict; the worker fills in its hardware when the plan has none."""
    worker = WorkerActor(main_pool=_StandInPool())
    plan = _plan(hardware={})
    hardware = linux().model_dump(mode="json")

    async def detect() -> dict[str, Any]:
        return hardware

    worker.hardware = detect  # type: ignore[method-assign]
    facts = asyncio.run(worker.launch_replica(plan if sent_as == "plan" else plan.to_dict()))
    assert facts == {"address": "sub:1", "pid": 4242, "engine_config": {}}
    ((_, sent),) = created
    assert isinstance(sent, LaunchPlan)
    assert sent.hardware == hardware and sent.engine_config == {"n_ctx": 512} and sent.launch_id == "L1"
    assert plan.hardware == {}  # the caller's plan is left as it was


def test_the_saved_state_is_json_and_relaunches_the_same_plans(created: list[tuple[Any, ...]], tmp_path: Path) -> None:
    worker = WorkerActor(main_pool=_StandInPool())
    plan = _plan()
    asyncio.run(worker.launch_replica(plan))
    saved = json.loads((tmp_path / "worker" / "replicas.json").read_text(encoding="utf-8"))
    assert saved == [plan.to_dict()]

    restarted = WorkerActor(main_pool=_StandInPool(), restore=True)
    relaunched: list[Any] = []

    async def launch_replica(again: Any) -> dict[str, Any]:
        relaunched.append(again)
        return {}

    restarted.launch_replica = launch_replica  # type: ignore[method-assign]
    asyncio.run(restarted._relaunch_saved())
    assert relaunched == [plan] and isinstance(relaunched[0], LaunchPlan)


def test_the_engine_class_is_looked_up_once_per_replica(
    monkeypatch: pytest.MonkeyPatch, created: list[tuple[Any, ...]]
) -> None:
    """Before, the worker looked the engine up at every start of the process and at every tick of its health
    watch (each second, for each replica)."""
    looked_up: list[str] = []
    real = worker_replica.get_engine_class

    def counting(name: str) -> type[Engine]:
        looked_up.append(name)
        return real(name)

    monkeypatch.setattr(worker_replica, "get_engine_class", counting)
    worker = WorkerActor(main_pool=_StandInPool())

    async def scenario() -> list[bool]:
        await worker.launch_replica(_plan(model_engine="vLLM"))
        replica = worker._replicas["m-0"]
        due = []
        for _ in range(5):
            replica.last_health = 0.0  # as if the interval had passed
            due.append(worker._health_due(replica))
        await worker._spawn(replica)  # a restart starts the process again
        return due

    due = asyncio.run(scenario())
    assert looked_up == ["vLLM"]
    assert due == [True] * 5  # vLLM's managed server has a health check: it is still polled


def test_an_engine_without_a_health_check_is_not_polled(created: list[tuple[Any, ...]]) -> None:
    worker = WorkerActor(main_pool=_StandInPool())

    async def scenario() -> bool:
        await worker.launch_replica(_plan())
        return worker._health_due(worker._replicas["m-0"])

    assert asyncio.run(scenario()) is False


def test_one_status_call_carries_the_replicas_progress(
    monkeypatch: pytest.MonkeyPatch, created: list[tuple[Any, ...]]
) -> None:
    worker = WorkerActor(main_pool=_StandInPool())
    actor = _StandInModelActor(progress=0.25)

    async def model_ref(address: str) -> _StandInModelActor:
        return actor

    monkeypatch.setattr(worker, "_model_ref", model_ref)

    async def scenario() -> tuple[dict[str, Any], float]:
        await worker.launch_replica(_plan())
        return await worker.launch_status("m-0"), await worker.launch_progress("m-0")

    status, progress = asyncio.run(scenario())
    assert status["replica_progress"] == 0.25 and status["stage"] == "downloading" and status["done_bytes"] == 25
    assert "progress" not in status  # a launch's "progress" is the whole launch's, the supervisor's to say
    assert progress == 0.25
    assert actor.calls == {"load_status": 2}  # one call each, never a second one for the fraction


def test_a_replica_whose_process_is_starting_has_no_progress_yet(created: list[tuple[Any, ...]]) -> None:
    worker = WorkerActor(main_pool=_StandInPool())
    worker._replicas["m-0"] = worker_module._Replica("m-0", "", Path("m-0.log"), _plan())
    status = asyncio.run(worker.launch_status("m-0"))
    assert status["stage"] == "starting the model process" and status["replica_progress"] == 0.0
    assert asyncio.run(worker.launch_progress("m-0")) == 0.0
