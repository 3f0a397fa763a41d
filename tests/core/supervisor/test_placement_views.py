"""What placement sees of each worker (``placement.worker_views``, ``Booker.place``): its replicas, the GPUs
they hold and the bookings of launches still starting, counted in one pass over the ledger whatever the number of
workers (a scan per worker made filling a 100-worker cluster quadratic: ``benchmark/results/scale.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.machines import linux
from xinference.core.ledger import Ledger
from xinference.core.placement import Placement, WorkerView, worker_views
from xinference.core.supervisor import booking as booking_module
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.records import LaunchRequest, WorkerEntry
from xinference.errors import InvalidRequest
from xinference.hardware import HardwareInfo


def _gpus(count: int) -> HardwareInfo:
    return linux(cores=8, ram_total=64, ram_free=32, gpus=count)


def test_views_count_replicas_and_union_their_gpus() -> None:
    workers = [("a:1", _gpus(4)), ("b:1", _gpus(2)), ("c:1", _gpus(0))]
    held = [("a:1", (0,)), ("a:1", (1, 2)), ("b:1", ()), ("a:1", ()), ("gone:1", (0,))]
    views = {v.address: v for v in worker_views(workers, held)}
    assert list(views) == ["a:1", "b:1", "c:1"]  # the workers' order, only the workers given
    assert (views["a:1"].replicas, views["a:1"].gpus_in_use) == (3, {0, 1, 2})
    assert (views["b:1"].replicas, views["b:1"].gpus_in_use) == (1, set())
    assert (views["c:1"].replicas, views["c:1"].gpus_in_use) == (0, set())
    assert views["a:1"].free_gpus() == [3]
    views["c:1"].gpus_in_use.add(9)  # each view owns its set
    assert worker_views(workers, held)[2].gpus_in_use == set()


class _Cluster:
    """The supervisor's placement over a plain worker table and ledger (``Booker.place`` reads only those)."""

    def __init__(self, workers: dict[str, HardwareInfo]) -> None:
        self._workers = {a: WorkerEntry(a, ref=None, hardware=hw) for a, hw in workers.items()}
        self.ledger = Ledger()
        self.booker = Booker(self._workers, self.ledger)

    def add(
        self,
        uid: str,
        started: Sequence[tuple[str, tuple[int, ...]]] = (),
        booked: Sequence[tuple[str, tuple[int, ...]]] = (),
    ) -> None:
        for i, (worker, gpus) in enumerate(started):
            self.ledger.book(f"{uid}-{i}", uid, "L", worker, gpus, 1 << 30, state="running")
        for i, (worker, gpus) in enumerate(booked, start=len(started)):
            self.ledger.book(f"{uid}-{i}", uid, "L", worker, gpus, 1 << 30)

    def place(self, replicas: int = 1, **launch: Any) -> list[Placement]:
        return self.booker.place(replicas, LaunchRequest(model_name="m", **launch))


def test_placement_sees_started_replicas_their_gpus_and_bookings(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _Cluster({"a:1": _gpus(2), "b:1": _gpus(2), "c:1": _gpus(1)})
    cluster.add("one", started=[("a:1", (0,)), ("b:1", (1,))])
    cluster.add("two", started=[("a:1", ())], booked=[("a:1", (1,))])  # a launch still starting its replica
    cluster.add("three", booked=[("c:1", (0,))])
    cluster.add("elsewhere", started=[("left:1", (0,))])  # its worker left: counts nowhere
    seen: list[WorkerView] = []
    real = booking_module.place_replicas

    def spy(views: Sequence[WorkerView], *args: Any) -> list[Placement]:
        seen.extend(views)
        return real(views, *args)

    monkeypatch.setattr(booking_module, "place_replicas", spy)
    assert cluster.place() == [Placement("b:1", (0,))]  # fewest replicas with a free GPU
    assert {v.address: (v.replicas, v.gpus_in_use) for v in seen} == {
        "a:1": (3, {0, 1}),
        "b:1": (1, {1}),
        "c:1": (1, {0}),
    }
    monkeypatch.setattr(booking_module, "place_replicas", real)
    with pytest.raises(InvalidRequest, match="0 free GPU"):  # the booking holds a's second GPU
        cluster.place(n_gpu=1, worker_ip="a:1")
    with pytest.raises(InvalidRequest, match="0 free GPU"):
        cluster.place(n_gpu=1, worker_ip="c:1")
    cluster.ledger.release("two-1")  # the launch failed: its GPU is free again
    assert cluster.place(n_gpu=1, worker_ip="a:1") == [Placement("a:1", (1,))]


def test_one_placement_reads_each_booking_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Placement costs O(workers + bookings): the ledger is read in one pass, not once per worker."""
    cluster = _Cluster({f"w{i}:1": _gpus(0) for i in range(60)})
    for i in range(20):
        cluster.add(f"m{i}", started=[(f"w{i % 60}:1", ())])
    reads = 0
    real = Ledger.held

    def counting(self: Ledger) -> list[tuple[str, tuple[int, ...]]]:
        nonlocal reads
        reads += 1
        return real(self)

    monkeypatch.setattr(Ledger, "held", counting)
    assert cluster.place(n_gpu=None) == [Placement("w20:1")]
    assert reads == 1
