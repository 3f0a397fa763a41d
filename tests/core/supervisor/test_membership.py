"""Cluster membership (``core/supervisor/membership.py``) and the status a model derives from its replicas
(``ModelRecord.refresh_status``), on plain records without actors or processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.machines import linux
from xinference.core.ledger import Ledger
from xinference.core.supervisor.membership import Membership
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import ModelRecord, Replica, WorkerEntry
from xinference.core.supervisor.tombstones import Tombstones


def _record(status: str, wanted: int, on: list[str]) -> ModelRecord:
    record = ModelRecord("m", choice=None, model_engine="llama.cpp", replica=wanted, status=status)  # type: ignore[arg-type]
    record.replicas = [Replica(f"m-{i}", worker, f"{worker}:sub{i}") for i, worker in enumerate(on)]
    return record


@pytest.mark.parametrize(
    ("status", "wanted", "on", "expected"),
    [
        ("ready", 2, ["w1", "w2"], "ready"),
        ("ready", 2, ["w1"], "degraded"),
        ("degraded", 2, [], "unavailable"),
        ("unavailable", 2, ["w1"], "degraded"),
        ("degraded", 2, ["w1", "w2"], "ready"),
        ("unavailable", 1, ["w1"], "ready"),
        # statuses owned by their own flow are kept, whatever the replicas
        ("launching", 2, ["w1"], "launching"),
        ("failed", 1, [], "failed"),
        ("unloading", 1, ["w1"], "unloading"),
        ("unloaded", 1, [], "unloaded"),
    ],
)
def test_refresh_status_follows_the_replicas_of_a_serving_model(
    status: str, wanted: int, on: list[str], expected: str
) -> None:
    record = _record(status, wanted, on)
    assert record.refresh_status() == expected
    assert record.status == expected


async def _no_ref(address: str) -> None:
    """Stands in for ``core/refs.worker_ref``: these tests never call a worker."""
    return None


class _Supervisor:
    """Membership over the plain tables SupervisorActor gives it, built here without an actor."""

    def __init__(self, tombstones: Path | None = None, incarnation: str = "now") -> None:
        self.workers: dict[str, WorkerEntry] = {}
        self.models = ModelTable()
        self.ledger = Ledger()
        self.tombstones = Tombstones(tombstones or Path("/nonexistent/tombstones.json"))
        self.autostarts = 0
        self.membership = Membership(
            self.workers,
            self.models,
            self.ledger,
            self.tombstones,
            incarnation,
            self._schedule_autostart,
            connect=_no_ref,
        )

    def _schedule_autostart(self) -> None:
        self.autostarts += 1


def _joined(sup: _Supervisor, address: str, last_seen: float) -> None:
    sup.workers[address] = WorkerEntry(address, ref=None, hardware=linux(), last_seen=last_seen)


def test_a_silent_worker_is_gone_and_its_replicas_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_WORKER_TIMEOUT", "30")
    sup = _Supervisor()
    _joined(sup, "w1", last_seen=100.0)
    _joined(sup, "w2", last_seen=125.0)
    sup.models.records["m"] = _record("ready", 2, ["w1", "w2"])
    assert sup.membership.expire_silent(now=129.0) == []
    assert sup.membership.expire_silent(now=131.0) == ["w1"]
    record = sup.models.records["m"]
    assert list(sup.workers) == ["w2"] and [r.replica_uid for r in record.replicas] == ["m-1"]
    assert record.status == "degraded" and sup.models.version == 1
    assert [e["event"] for e in record.events] == ["replica_lost"]
    assert "worker w1 stopped heartbeating (31s silent)" in record.events[-1]["message"]
    assert sup.membership.expire_silent(now=200.0) == ["w2"]
    assert record.status == "unavailable" and record.replicas == []


def test_heartbeats_and_an_orderly_leave() -> None:
    asyncio.run(_heartbeats_and_an_orderly_leave())


async def _heartbeats_and_an_orderly_leave() -> None:
    sup = _Supervisor()
    assert await sup.membership.heartbeat("w1", linux().model_dump(mode="json")) is False  # unknown: re-register
    _joined(sup, "w1", last_seen=0.0)
    assert await sup.membership.heartbeat("w1", linux().model_dump(mode="json")) is True
    assert sup.workers["w1"].last_seen > 0.0
    await sup.membership.remove_worker("w1")
    await sup.membership.remove_worker("w1")  # twice: nothing more happens
    assert sup.workers == {} and sup.models.version == 1


def test_a_dead_replica_leaves_and_comes_back_when_restarted() -> None:
    asyncio.run(_a_dead_replica_leaves_and_comes_back())


async def _a_dead_replica_leaves_and_comes_back() -> None:
    sup = _Supervisor()
    record = sup.models.records["m"] = _record("ready", 1, ["w1"])
    await sup.membership.replica_failed("m", "m-0", "the model process exited with code -9\nlog")
    assert record.status == "unavailable" and record.replicas == []
    report: dict[str, Any] = {
        "plan": {
            "model_uid": "m",
            "replica_uid": "m-0",
            "model_engine": "llama.cpp",
            "family": {},
            "spec": {},
            "quantization": "Q4_0",
            "engine_config": {},
            "gpu_indices": [],
        },
        "address": "w1:sub9",
        "pid": 42,
    }
    assert await sup.membership.replica_restarted("w1", report) == {"kill": None}
    assert record.status == "ready" and record.replicas[0].address == "w1:sub9"
    assert [e["event"] for e in record.events] == ["replica_died", "replica_restarted"]
    await sup.membership.replica_failed("unknown", "x-0", "")  # a model terminated meanwhile: ignored


# -- replica identity: keep or kill what a (re-)registering worker reports -------------------------------------------
def _smol_plan(
    replica_uid: str = "smol-0", launch_id: str = "L1", incarnation: str = "before", gpus: list[int] | None = None
) -> dict[str, Any]:
    from xinference.model.registry import ModelRegistry

    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    return {
        "model_uid": replica_uid.rsplit("-", 1)[0],
        "replica_uid": replica_uid,
        "model_engine": "llama.cpp",
        "family": family.model_dump(mode="json"),
        "spec": spec.model_dump(mode="json"),
        "quantization": spec.quantizations[0],
        "engine_config": {},
        "gpu_indices": gpus or [],
        "launch_id": launch_id,
        "incarnation": incarnation,
    }


def _report(plan: dict[str, Any], address: str = "w1:sub1") -> dict[str, Any]:
    return {"plan": plan, "address": address, "pid": 7, "engine_config": {}}


@pytest.fixture()
def sup(tmp_path: Path) -> _Supervisor:
    return _Supervisor(tmp_path / "tombstones.json")


def _join(sup: _Supervisor, *reports: dict[str, Any], address: str = "w1") -> dict[str, Any]:
    answer: dict[str, Any] = asyncio.run(
        sup.membership.add_worker(address, linux().model_dump(mode="json"), list(reports))
    )
    return answer


def test_a_replica_of_an_earlier_supervisor_is_adopted_with_its_launch(sup: _Supervisor) -> None:
    assert _join(sup, _report(_smol_plan())) == {"kill": {}}
    record = sup.models.records["smol"]
    assert record.launch_id == "L1" and [r.replica_uid for r in record.replicas] == ["smol-0"]
    assert [b.state for b in sup.ledger] == ["running"]


def test_a_terminated_launch_is_killed_not_adopted_even_after_a_supervisor_restart(
    sup: _Supervisor, tmp_path: Path
) -> None:
    sup.tombstones.add("L1", "smol")
    # a new supervisor reads the tombstones back
    restarted = _Supervisor(tmp_path / "tombstones.json", incarnation="after")
    answer = asyncio.run(
        restarted.membership.add_worker("w1", linux().model_dump(mode="json"), [_report(_smol_plan())])
    )
    assert "terminated while its worker was away" in answer["kill"]["smol-0"]
    assert restarted.models.records == {} and len(restarted.ledger) == 0


def test_a_launch_of_this_supervisor_that_no_longer_runs_is_killed(sup: _Supervisor) -> None:
    answer = _join(sup, _report(_smol_plan(incarnation="now")))
    assert "not running any more" in answer["kill"]["smol-0"] and sup.models.records == {}


def test_a_reused_uid_never_adopts_the_old_launch(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan(launch_id="NEW")), address="w2")
    answer = _join(sup, _report(_smol_plan(launch_id="OLD")))
    assert "belongs to another launch" in answer["kill"]["smol-0"]
    assert [r.worker_address for r in sup.models.records["smol"].replicas] == ["w2"]


def test_a_model_with_all_its_replicas_does_not_adopt_one_more(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan("smol-0")), address="w2")
    answer = _join(sup, _report(_smol_plan("smol-1")))
    assert "has its 1 replica(s) already" in answer["kill"]["smol-1"]
    assert len(sup.models.records["smol"].replicas) == 1 and len(sup.ledger) == 1


def test_a_worker_that_comes_back_without_a_replica_frees_it(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan(gpus=[0])))
    assert _join(sup) == {"kill": {}}  # its process restarted: it runs nothing now
    record = sup.models.records["smol"]
    assert record.replicas == [] and record.status == "unavailable" and len(sup.ledger) == 0
    assert record.events[-1]["event"] == "replica_lost"


def test_a_forgotten_worker_releases_its_bookings_and_wakes_its_waiters(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan(gpus=[0])))
    entry = sup.workers["w1"]
    sup.membership.forget_worker("w1", "stopped heartbeating")
    assert entry.gone.is_set() and len(sup.ledger) == 0 and sup.ledger.released == 1


def test_a_replica_restarted_after_its_model_was_terminated_is_killed(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan(incarnation="now")))  # killed: nothing runs
    answer = asyncio.run(sup.membership.replica_restarted("w1", _report(_smol_plan(incarnation="now"))))
    assert "not running any more" in answer["kill"]


def test_a_replica_given_up_on_releases_its_booking(sup: _Supervisor) -> None:
    _join(sup, _report(_smol_plan(gpus=[0])))
    asyncio.run(sup.membership.replica_failed("smol", "smol-0", "died"))
    assert len(sup.ledger) == 1  # its worker restarts it on the same GPU
    asyncio.run(sup.membership.replica_failed("smol", "smol-0", "gave up after 3 restart(s)", True))
    assert len(sup.ledger) == 0


def test_every_join_schedules_the_autostart(sup: _Supervisor) -> None:
    _join(sup)
    _join(sup, address="w2")
    _join(sup)  # a re-registration too: a worker back after a restart may be the one the models ran on
    assert sup.autostarts == 3
