"""Placement over many cluster shapes (pure functions, no processes)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.machines import linux
from xinference.core.placement import Placement, WorkerView, parse_gpu_idx, place_replicas
from xinference.errors import InvalidRequest
from xinference.hardware import HardwareInfo


def hw(gpus: int = 0, ram_free: int = 16) -> HardwareInfo:
    return linux(cores=8, ram_total=64, ram_free=ram_free, gpus=gpus, gpu_name="H200", vram=140, vram_free=140)


def test_spreads_replicas_over_workers() -> None:
    workers = [WorkerView("10.0.0.1:1", hw()), WorkerView("10.0.0.2:1", hw()), WorkerView("10.0.0.3:1", hw())]
    placed = place_replicas(workers, 6, n_gpu=None)
    assert Counter(p.address for p in placed) == {"10.0.0.1:1": 2, "10.0.0.2:1": 2, "10.0.0.3:1": 2}


def test_prefers_less_loaded_then_more_memory() -> None:
    workers = [
        WorkerView("a:1", hw(ram_free=8), replicas=1),
        WorkerView("b:1", hw(ram_free=4)),
        WorkerView("c:1", hw(ram_free=12)),
    ]
    assert [p.address for p in place_replicas(workers, 2, n_gpu=None)] == ["c:1", "b:1"]


def test_input_views_are_not_mutated() -> None:
    worker = WorkerView("a:1", hw(gpus=2))
    place_replicas([worker], 2, n_gpu=1)
    assert worker.replicas == 0 and worker.gpus_in_use == set()


def test_gpus_are_not_shared_between_replicas() -> None:
    placed = place_replicas([WorkerView("a:1", hw(gpus=4), gpus_in_use={0})], 3, n_gpu=1)
    assert [p.gpu_indices for p in placed] == [(1,), (2,), (3,)]
    with pytest.raises(InvalidRequest, match="free GPU"):
        place_replicas([WorkerView("a:1", hw(gpus=2))], 3, n_gpu=1)


def test_multi_gpu_replicas_across_workers() -> None:
    workers = [WorkerView("a:1", hw(gpus=2)), WorkerView("b:1", hw(gpus=4))]
    placed = place_replicas(workers, 3, n_gpu=2)
    assert sorted((p.address, p.gpu_indices) for p in placed) == [("a:1", (0, 1)), ("b:1", (0, 1)), ("b:1", (2, 3))]


def test_auto_uses_a_gpu_when_free_else_cpu() -> None:
    assert place_replicas([WorkerView("a:1", hw(gpus=1))], 2, n_gpu="auto") == [
        Placement("a:1", (0,)),
        Placement("a:1", ()),
    ]
    assert place_replicas([WorkerView("a:1", hw())], 1) == [Placement("a:1", ())]


def test_worker_ip_by_host_or_address() -> None:
    workers = [WorkerView("10.0.0.1:7000", hw()), WorkerView("10.0.0.2:7000", hw())]
    assert {p.address for p in place_replicas(workers, 2, n_gpu=None, worker_ip="10.0.0.2")} == {"10.0.0.2:7000"}
    assert place_replicas(workers, 1, n_gpu=None, worker_ip="10.0.0.1:7000")[0].address == "10.0.0.1:7000"
    with pytest.raises(InvalidRequest, match="no worker at"):
        place_replicas(workers, 1, worker_ip="10.9.9.9")


@pytest.mark.parametrize(
    "value,message",
    [
        ([0, 0], "twice"),
        ([-1], "negative"),
        ("0,1", "GPU index"),
        ([], "GPU index"),
        ([True], "GPU index"),
        ([0.5], "GPU index"),
    ],
)
def test_gpu_idx_validation(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_gpu_idx(value)


def test_gpu_idx_must_exist_and_target_one_worker() -> None:
    one = [WorkerView("a:1", hw(gpus=2))]
    assert place_replicas(one, 1, gpu_idx=parse_gpu_idx([1])) == [Placement("a:1", (1,))]
    assert parse_gpu_idx(3) == (3,)
    with pytest.raises(InvalidRequest, match="does not exist"):
        place_replicas(one, 1, gpu_idx=(5,))
    with pytest.raises(InvalidRequest, match="one worker"):
        place_replicas(one + [WorkerView("b:1", hw(gpus=2))], 1, gpu_idx=(0,))


def test_no_workers() -> None:
    with pytest.raises(InvalidRequest, match="no worker"):
        place_replicas([], 1)
