"""Cluster membership (``core/supervisor/membership.py``) and the status a model derives from its replicas
(``ModelRecord.refresh_status``), on plain records without actors or processes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.machines import linux
from xinference.core.supervisor.membership import MembershipMixin
from xinference.core.supervisor.records import ModelRecord, Replica, WorkerEntry


def _record(status: str, wanted: int, on: list[str]) -> ModelRecord:
    record = ModelRecord("m", choice=None, model_engine="llama.cpp", replica=wanted, status=status)  # type: ignore[arg-type]
    record.replicas = [Replica(f"m-{i}", worker, f"{worker}:sub{i}") for i, worker in enumerate(on)]
    return record


@pytest.mark.parametrize(("status", "wanted", "on", "expected"), [
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
])
def test_refresh_status_follows_the_replicas_of_a_serving_model(status: str, wanted: int, on: list[str],
                                                                 expected: str) -> None:
    record = _record(status, wanted, on)
    assert record.refresh_status() == expected
    assert record.status == expected


class _Supervisor(MembershipMixin):
    """The mixin over plain records, as SupervisorActor holds them."""

    def __init__(self) -> None:
        self._workers: dict[str, WorkerEntry] = {}
        self._models: dict[str, ModelRecord] = {}
        self.version = 0
        self.autostarts = 0

    def _changed(self) -> None:
        self.version += 1

    def _schedule_autostart(self) -> None:
        self.autostarts += 1


def _joined(sup: _Supervisor, address: str, last_seen: float) -> None:
    sup._workers[address] = WorkerEntry(address, ref=None, hardware=linux(), last_seen=last_seen)


def test_a_silent_worker_is_gone_and_its_replicas_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_WORKER_TIMEOUT", "30")
    sup = _Supervisor()
    _joined(sup, "w1", last_seen=100.0)
    _joined(sup, "w2", last_seen=125.0)
    sup._models["m"] = _record("ready", 2, ["w1", "w2"])
    assert sup._expire_silent(now=129.0) == []
    assert sup._expire_silent(now=131.0) == ["w1"]
    record = sup._models["m"]
    assert list(sup._workers) == ["w2"] and [r.replica_uid for r in record.replicas] == ["m-1"]
    assert record.status == "degraded" and sup.version == 1
    assert [e["event"] for e in record.events] == ["replica_lost"]
    assert "worker w1 stopped heartbeating (31s silent)" in record.events[-1]["message"]
    assert sup._expire_silent(now=200.0) == ["w2"]
    assert record.status == "unavailable" and record.replicas == []


def test_heartbeats_and_an_orderly_leave() -> None:
    asyncio.run(_heartbeats_and_an_orderly_leave())


async def _heartbeats_and_an_orderly_leave() -> None:
    sup = _Supervisor()
    assert await sup.heartbeat("w1", linux().model_dump(mode="json")) is False  # unknown: re-register
    _joined(sup, "w1", last_seen=0.0)
    assert await sup.heartbeat("w1", linux().model_dump(mode="json")) is True
    assert sup._workers["w1"].last_seen > 0.0
    await sup.remove_worker("w1")
    await sup.remove_worker("w1")  # twice: nothing more happens
    assert sup._workers == {} and sup.version == 1


def test_a_dead_replica_leaves_and_comes_back_when_restarted() -> None:
    asyncio.run(_a_dead_replica_leaves_and_comes_back())


async def _a_dead_replica_leaves_and_comes_back() -> None:
    sup = _Supervisor()
    record = sup._models["m"] = _record("ready", 1, ["w1"])
    await sup.replica_failed("m", "m-0", "the model process exited with code -9\nlog")
    assert record.status == "unavailable" and record.replicas == []
    report: dict[str, Any] = {"plan": {"model_uid": "m", "replica_uid": "m-0", "model_engine": "llama.cpp",
                                       "family": {}, "spec": {}, "quantization": "Q4_0", "engine_config": {},
                                       "gpu_indices": []},
                              "address": "w1:sub9", "pid": 42}
    await sup.replica_restarted("w1", report)
    assert record.status == "ready" and record.replicas[0].address == "w1:sub9"
    assert [e["event"] for e in record.events] == ["replica_died", "replica_restarted"]
    await sup.replica_failed("unknown", "x-0", "")  # a model terminated meanwhile: ignored
