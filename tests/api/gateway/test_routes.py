"""The route table asks the supervisor once for a burst of lookups that all need a refresh (single-flight).

The supervisor is a counting stand-in whose ``get_routes`` waits on a gate, so every lookup of the burst is
waiting while the first refresh is under way; the count of supervisor calls is the assertion, not a duration.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from xinference.api.gateway.routes import RouteTable
from xinference.errors import ModelNotFound

_ROUTE = {"model_type": "LLM", "model_ability": ["chat"], "status": "ready", "replicas": ["127.0.0.1:1"]}


class CountingSupervisor:
    """Answers ``get_routes`` with one model once ``gate`` opens, counting the calls."""

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = routes
        self.calls = 0
        self.gate = asyncio.Event()

    async def get_routes(self) -> tuple[int, dict[str, Any]]:
        self.calls += 1
        await self.gate.wait()
        return 1, dict(self.routes)


async def _burst(table: RouteTable, supervisor: CountingSupervisor, uid: str, n: int = 50) -> list[Any]:
    lookups = [asyncio.ensure_future(table.get(uid)) for _ in range(n)]
    await asyncio.sleep(0)  # every lookup reaches the refresh before the supervisor answers
    await asyncio.sleep(0)
    supervisor.gate.set()
    return await asyncio.gather(*lookups, return_exceptions=True)


def test_fifty_lookups_of_a_cold_route_make_one_supervisor_call() -> None:
    async def run() -> tuple[int, list[Any]]:
        supervisor = CountingSupervisor({"m": _ROUTE})
        table = RouteTable(supervisor)
        results = await _burst(table, supervisor, "m")
        return supervisor.calls, results

    calls, results = asyncio.run(run())
    assert all(r.model_uid == "m" for r in results)
    assert calls == 1


def test_fifty_lookups_after_invalidate_make_one_supervisor_call() -> None:
    async def run() -> int:
        supervisor = CountingSupervisor({"m": _ROUTE})
        supervisor.gate.set()
        table = RouteTable(supervisor)
        await table.get("m")
        supervisor.gate.clear()
        table.invalidate()  # a replica was found unreachable: every lookup now wants a fresh table
        await _burst(table, supervisor, "m")
        return supervisor.calls

    assert asyncio.run(run()) == 2  # the warm-up, then one for the whole burst


def test_fifty_lookups_of_an_unknown_model_are_404_after_at_most_two_calls() -> None:
    async def run() -> tuple[int, list[Any]]:
        supervisor = CountingSupervisor({"m": _ROUTE})
        table = RouteTable(supervisor)
        results = await _burst(table, supervisor, "nope")
        return supervisor.calls, results

    calls, results = asyncio.run(run())
    assert all(isinstance(r, ModelNotFound) for r in results)
    # one shared refresh, and one more shared by the lookups that joined it after it began (it may predate a launch)
    assert calls <= 2


def test_invalidate_during_a_refresh_keeps_the_table_stale() -> None:
    async def run() -> tuple[int, bool]:
        supervisor = CountingSupervisor({"m": _ROUTE})
        table = RouteTable(supervisor)
        refresh = asyncio.ensure_future(table.refresh())
        await asyncio.sleep(0)
        table.invalidate()  # the answer on its way may already be out of date
        supervisor.gate.set()
        await refresh
        await table.get("m")
        return supervisor.calls, table._stale

    calls, stale = asyncio.run(run())
    assert calls == 2 and not stale


def test_a_failed_refresh_fails_every_waiter_and_the_next_lookup_retries() -> None:
    class Failing(CountingSupervisor):
        async def get_routes(self) -> tuple[int, dict[str, Any]]:
            self.calls += 1
            await self.gate.wait()
            if self.calls == 1:
                raise ConnectionError("supervisor restarting")
            return 1, dict(self.routes)

    async def run() -> tuple[list[Any], Any, int]:
        supervisor = Failing({"m": _ROUTE})
        table = RouteTable(supervisor)
        results = await _burst(table, supervisor, "m", n=5)
        return results, await table.get("m"), supervisor.calls

    results, route, calls = asyncio.run(run())
    assert all(isinstance(r, ConnectionError) for r in results)
    assert route.model_uid == "m" and calls == 2


@pytest.mark.parametrize("n", [1, 3])
def test_a_cancelled_lookup_does_not_cancel_the_shared_refresh(n: int) -> None:
    async def run() -> int:
        supervisor = CountingSupervisor({"m": _ROUTE})
        table = RouteTable(supervisor)
        leaving = [asyncio.ensure_future(table.get("m")) for _ in range(n)]
        staying = asyncio.ensure_future(table.get("m"))
        await asyncio.sleep(0)
        for task in leaving:
            task.cancel()  # their clients left
        supervisor.gate.set()
        route = await staying
        assert route.model_uid == "m"
        return supervisor.calls

    assert asyncio.run(run()) == 1
