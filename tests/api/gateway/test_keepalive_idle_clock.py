"""When keep-alive's idle clock starts (``api/gateway/keepalive.py``), without a server: a model's idle time counts from
its last request, but never from before it last started serving. Otherwise a model whose load took longer than its
keep-alive (a load on demand whose requests got 503 after ``XINFERENCE_LOAD_TIMEOUT``, or ``POST .../load`` long
after the last request) was unloaded the moment it was up, and a client retrying after ``Retry-After`` started
another load, again and again.

The admission gates are the real ones; the route table and the supervisor are stand-ins with only what
:class:`KeepAlive` reads and calls.
"""

from __future__ import annotations

import asyncio
from typing import Any

from xinference.api.gateway.admission import Admission
from xinference.api.gateway.keepalive import KeepAlive
from xinference.api.gateway.routes import Route

KEEP = 2.0


class _Routes:
    """Stand-in for the API's RouteTable: the routes as last refreshed."""

    def __init__(self, *routes: Route) -> None:
        self.routes = list(routes)

    def all(self) -> list[Route]:
        return list(self.routes)

    async def refresh(self) -> int:
        return 0


class _Supervisor:
    """Stand-in for the supervisor: records what it was asked to unload."""

    def __init__(self) -> None:
        self.unloaded: list[str] = []

    async def unload_model(self, uid: str, reason: str) -> dict[str, Any]:
        self.unloaded.append(uid)
        return {}


def _setup(status: str) -> tuple[KeepAlive, Route, Admission, _Supervisor]:
    route = Route("m", "LLM", ["chat"], status=status, engine="llama.cpp", limits={"keep_alive": KEEP})
    admission, supervisor = Admission(), _Supervisor()
    return KeepAlive(supervisor, _Routes(route), admission), route, admission, supervisor  # type: ignore[arg-type]


def test_a_reloaded_model_gets_its_whole_keep_alive() -> None:
    async def scenario() -> None:
        keep, route, admission, supervisor = _setup("unloaded")
        gate = admission.gate("m", "llama.cpp", route.limits, 1)
        t0 = 1000.0
        gate.idle_since = t0 - 100  # the last request (one refused after the load timeout) left long ago
        assert keep.check(now=t0) == []  # not serving: nothing to unload
        route.status = "ready"  # the load finished
        assert keep.check(now=t0 + 0.5) == []
        assert keep.check(now=t0 + 0.5 + KEEP - 0.1) == []
        assert keep.check(now=t0 + 0.5 + KEEP + 0.1) == ["m"]
        await asyncio.sleep(0.01)  # the unload task runs to its end
        assert supervisor.unloaded == ["m"]

    asyncio.run(scenario())


def test_idle_time_still_counts_from_the_last_request() -> None:
    async def scenario() -> None:
        keep, route, admission, supervisor = _setup("ready")
        gate = admission.gate("m", "llama.cpp", route.limits, 1)
        t0 = 1000.0
        assert keep.check(now=t0) == []  # seen serving from t0
        gate.idle_since = t0 + 5  # a request ended then
        assert keep.check(now=t0 + 5 + KEEP - 0.1) == []
        assert keep.check(now=t0 + 5 + KEEP + 0.1) == ["m"]
        await asyncio.sleep(0.01)  # the unload task runs to its end
        assert supervisor.unloaded == ["m"]

    asyncio.run(scenario())


def test_the_clock_starts_again_after_each_unload() -> None:
    async def scenario() -> None:
        keep, route, admission, _ = _setup("ready")
        gate = admission.gate("m", "llama.cpp", route.limits, 1)
        gate.idle_since = 0.0
        assert keep.check(now=10.0) == []  # first seen serving at 10
        assert keep.check(now=10.0 + KEEP + 0.1) == ["m"]
        await asyncio.sleep(0.01)  # the unload task runs to its end
        route.status = "unloaded"
        assert keep.check(now=20.0) == []
        route.status = "ready"  # loaded by hand at 30, with no request since
        assert keep.check(now=30.0) == []
        assert keep.check(now=30.0 + KEEP - 0.1) == []
        assert keep.check(now=30.0 + KEEP + 0.1) == ["m"]

    asyncio.run(scenario())
