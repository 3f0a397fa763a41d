"""The supervisor's read-only views for the UI: which replica a log request means, and the devices per worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.machines import GIB, linux
from xinference.core.ledger import Ledger
from xinference.core.supervisor.inspect import Inspector
from xinference.core.supervisor.models import ModelTable
from xinference.errors import ModelNotFound
from xinference.hardware import HardwareInfo


@dataclass
class _Replica:
    replica_uid: str
    worker_address: str
    gpu_indices: tuple[int, ...] = ()


@dataclass
class _Record:
    replicas: list[_Replica]
    pending: tuple[str, str] | None = None
    status: str = "ready"
    replica: int = 1


@dataclass
class _Worker:
    hardware: HardwareInfo
    reads: list[tuple[Any, ...]] = field(default_factory=list)


def _inspector(models: dict[str, Any], workers: dict[str, Any]) -> Inspector:
    """The inspector over plain records (what SupervisorActor gives it), without actors."""
    return Inspector(ModelTable(models), workers, Ledger())


def test_replica_for_log_by_default_index_or_uid_and_pending() -> None:
    record = _Record([_Replica("m-0", "w1"), _Replica("m-1", "w2")], pending=("w1", "m-2"))
    sup = _inspector({"m": record}, {})
    assert sup.replica_for_log("m", None) == ("w1", "m-0", ["m-0", "m-1", "m-2"])
    assert sup.replica_for_log("m", "1")[:2] == ("w2", "m-1")
    assert sup.replica_for_log("m", "m-2")[:2] == ("w1", "m-2")  # still starting: its log is readable
    with pytest.raises(ModelNotFound, match="no replica '5'; it has: m-0, m-1, m-2"):
        sup.replica_for_log("m", "5")
    with pytest.raises(ModelNotFound):
        sup.replica_for_log("other", None)


def test_devices_list_every_gpu_with_its_holders() -> None:
    hw = linux(gpus=2, vram=80, vram_free=60)
    record = _Record([_Replica("big-0", "w1", (1,))])
    devices = _inspector({"big": record}, {"w1": _Worker(hw), "w2": _Worker(linux())}).devices()
    assert devices == [
        {
            "worker": "w1",
            "index": 0,
            "name": "H100",
            "vendor": "nvidia",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 20 * GIB,
            "models": [],
        },
        {
            "worker": "w1",
            "index": 1,
            "name": "H100",
            "vendor": "nvidia",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 20 * GIB,
            "models": ["big-0"],
        },
    ]
