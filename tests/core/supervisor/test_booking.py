"""The booker's memory view when a replica finishes loading between a worker's report and the booking."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.machines import linux
from xinference.core.ledger import Ledger
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.records import WorkerEntry

GIB = 1 << 30


class SlowReportWorker:
    """Test double of a worker reference: its hardware report is measured when asked, then held until released,
    so the test can change the ledger while the report is on its way (as a launch finishing elsewhere does)."""

    def __init__(self) -> None:
        self.ram_free = 20
        self.release = asyncio.Event()
        self.asked = asyncio.Event()

    async def hardware(self) -> dict[str, Any]:
        measured = linux(ram_free=self.ram_free).model_dump(mode="json")
        self.asked.set()
        await self.release.wait()
        return measured


def test_a_replica_that_turns_running_while_its_report_travels_is_still_counted() -> None:
    asyncio.run(_turns_running_while_the_report_travels())


async def _turns_running_while_the_report_travels() -> None:
    stand_in = SlowReportWorker()
    ledger = Ledger()
    workers = {"w1": WorkerEntry("w1", ref=stand_in, hardware=linux())}  # type: ignore[arg-type]
    booker = Booker(workers, ledger)
    ledger.book("a-0", "a", "L", "w1", (), 8 * GIB)
    assert booker._free_now("w1").ram_free_bytes == 12 * GIB  # loading: not in the report yet

    refresh = asyncio.create_task(booker.refresh(["w1"]))
    await stand_in.asked.wait()  # the worker measured 20 GiB free: a-0's process does not hold its memory yet
    ledger.mark("a-0", "running")  # ...and now it does; the report on its way does not show it
    stand_in.release.set()
    await refresh
    assert workers["w1"].hardware.ram_free_bytes == 20 * GIB
    assert booker._free_now("w1").ram_free_bytes == 12 * GIB  # a-0 counted by neither would leave 20

    stand_in.ram_free = 12  # a later report shows a-0's memory itself: it is not taken off twice
    stand_in.release = asyncio.Event()
    stand_in.release.set()
    await booker.refresh(["w1"])
    assert booker._free_now("w1").ram_free_bytes == 12 * GIB


def test_the_epoch_moves_only_when_a_replica_starts_running() -> None:
    ledger = Ledger()
    ledger.book("a-0", "a", "L", "w1", (0,), 10)
    ledger.book("b-0", "b", "L", "w1", (), 6, state="running")  # adopted: already in the worker's report
    assert ledger.epoch == 0 and ledger.loading("w1", 0) == (0, {0: 10})
    ledger.mark("a-0", "running")
    ledger.mark("a-0", "running")
    assert ledger.epoch == 1
    assert ledger.loading("w1", 0) == (0, {0: 10}) and ledger.loading("w1", 1) == (0, {})
    ledger.mark("a-0", "stopping")
    assert ledger.epoch == 1 and ledger.loading("w1", 0) == (0, {})
