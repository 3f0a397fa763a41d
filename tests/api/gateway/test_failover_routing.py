"""Failover in the route table, without model processes: which replica a request goes to, and how fast an
unreachable one is left.

A replica that "does not answer" is a real listening socket whose accept queue is full, so the kernel drops new
SYNs as it would for a host that is down; one that "is gone" is a port nobody listens on. The replicas that serve
are stand-ins (``StandInModelActor``) at addresses that are not ``host:port``, which the connect probe leaves alone.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import xoscar as xo

import xinference.api.gateway.routes as route_cache
from xinference.api.gateway.routes import Replica, Route, RouteTable
from xinference.core.reachability import probe_connect
from xinference.errors import ReplicaUnreachable


class StandInModelActor:
    """Stands in for a ModelActor ref: ``chat`` answers with its name and counts the calls."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    async def chat(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"served_by": self.name}


@pytest.fixture
def silent_address() -> Iterator[str]:
    """``127.0.0.1:port`` of a listener that never accepts, its queue filled: further connects get no answer."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for s in [*fillers, listener]:
            s.close()


@pytest.fixture
def closed_address() -> str:
    """``127.0.0.1:port`` where nothing listens (a process that exited): connects are refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"127.0.0.1:{port}"


def _route(*replicas: Replica) -> Route:
    return Route("m", "LLM", ["chat"], replicas=list(replicas))


def _chat(replica: Replica) -> Any:
    return replica.ref.chat({})


def test_replicas_that_tie_take_turns() -> None:
    """Sequential requests (never more than one outstanding) alternate between two replicas, so both stay warm."""
    a, b = StandInModelActor("a"), StandInModelActor("b")
    route = _route(Replica("stand-in-a", a), Replica("stand-in-b", b))
    table = RouteTable(supervisor=None)

    async def run() -> list[str]:
        return [(await table.call(route, _chat))[0]["served_by"] for _ in range(6)]

    assert asyncio.run(run()) == ["a", "b", "a", "b", "a", "b"]


def test_fewest_outstanding_still_wins_over_turns() -> None:
    a, b = StandInModelActor("a"), StandInModelActor("b")
    route = _route(Replica("stand-in-a", a), Replica("stand-in-b", b))
    route.replicas[1].outstanding = 2  # b is busy with two streams
    table = RouteTable(supervisor=None)

    async def run() -> list[str]:
        return [(await table.call(route, _chat))[0]["served_by"] for _ in range(3)]

    assert asyncio.run(run()) == ["a", "a", "a"]


def test_a_replica_already_marked_unreachable_is_not_tried(closed_address: str) -> None:
    """A route object taken before the replica was found unreachable still lists it: the request skips it."""
    dead, live = StandInModelActor("dead"), StandInModelActor("live")
    gone = Replica(closed_address, dead)
    gone.reached = True  # it served before: no connect probe
    route = _route(gone, Replica("stand-in-live", live))
    table = RouteTable(supervisor=None)
    table.mark_unreachable(closed_address)

    result, _ = asyncio.run(table.call(route, _chat))
    assert result == {"served_by": "live"} and dead.calls == 0


def test_every_replica_marked_unreachable_is_still_tried() -> None:
    """Marks are a preference: with no other replica left, the marked one gets the request."""
    only = StandInModelActor("only")
    route = _route(Replica("stand-in-only", only))
    table = RouteTable(supervisor=None)
    table.mark_unreachable("stand-in-only")
    assert asyncio.run(table.call(route, _chat))[0] == {"served_by": "only"}


def test_a_silent_replica_is_left_within_the_connect_bound(
    silent_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request goes to the other replica after the connect bound (xoscar's own connect would wait 8 s, holding
    the lock every new connection of the process needs); the next request skips the silent one at once."""
    monkeypatch.setenv("XINFERENCE_REPLICA_CONNECT_TIMEOUT", "0.3")
    live = StandInModelActor("live")
    silent = Replica(silent_address, xo.create_actor_ref(silent_address, "model"))
    route = _route(silent, Replica("stand-in-live", live))
    table = RouteTable(supervisor=None)

    async def run() -> tuple[list[float], list[str]]:
        times, served = [], []
        for _ in range(2):
            started = time.monotonic()
            result, _ = await table.call(route, _chat)
            times.append(time.monotonic() - started)
            served.append(result["served_by"])
        return times, served

    times, served = asyncio.run(run())
    assert served == ["live", "live"]
    assert 0.25 < times[0] < 1.0, times  # the bound, not xoscar's 8 s
    assert times[1] < 0.1, times
    assert silent_address in table.suspected() and silent not in route.replicas


def test_a_refused_replica_is_left_at_once(closed_address: str) -> None:
    live = StandInModelActor("live")
    route = _route(
        Replica(closed_address, xo.create_actor_ref(closed_address, "model")), Replica("stand-in-live", live)
    )
    table = RouteTable(supervisor=None)

    async def run() -> float:
        started = time.monotonic()
        assert (await table.call(route, _chat))[0] == {"served_by": "live"}
        return time.monotonic() - started

    assert asyncio.run(run()) < 0.5


def test_the_last_replica_gets_the_longer_connect_bound(silent_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nowhere else to go, a silent replica is given ``LAST_REPLICA_CONNECT_TIMEOUT`` before the 503."""
    monkeypatch.setenv("XINFERENCE_REPLICA_CONNECT_TIMEOUT", "0.1")
    monkeypatch.setattr(route_cache, "LAST_REPLICA_CONNECT_TIMEOUT", 0.8)
    route = _route(Replica(silent_address, xo.create_actor_ref(silent_address, "model")))
    table = RouteTable(supervisor=None)

    async def run() -> float:
        started = time.monotonic()
        with pytest.raises(ReplicaUnreachable, match="did not accept a connection within 0.8s"):
            await table.call(route, _chat)
        return time.monotonic() - started

    assert 0.7 < asyncio.run(run()) < 2.0


def test_probe_connect_outcomes(silent_address: str, closed_address: str) -> None:
    async def run() -> None:
        started = time.monotonic()
        with pytest.raises(ConnectionError, match="within 0.2s"):
            await probe_connect(silent_address, 0.2)
        assert time.monotonic() - started < 1.0
        with pytest.raises(ConnectionRefusedError):
            await probe_connect(closed_address, 5.0)
        await probe_connect("unixsocket:///tmp/pool", 0.1)  # not TCP: left to xoscar

        listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        await probe_connect(f"127.0.0.1:{port}", 1.0)
        listener.close()

    asyncio.run(run())
