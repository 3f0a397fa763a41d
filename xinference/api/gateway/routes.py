"""The API's cached route table: model uid → its replicas' ModelActor refs.

Requests look routes up here and call the model actor directly (one actor hop). The table is rebuilt from the
supervisor when a uid is missing or when the supervisor's table ``version`` moves (watched in the background), so
the supervisor is never on the per-request path. A replica is chosen by fewest outstanding requests.

Refreshes are single-flight: requests that find their route stale or missing while a refresh is under way wait for
that one instead of each asking the supervisor (a burst of requests for a just-launched model, or for a model that
does not exist, would otherwise send one ``get_routes`` call each).

Failover: a replica whose process is gone or does not answer is skipped at once and the request tried on another
one, long before the supervisor declares its worker dead (``XINFERENCE_WORKER_TIMEOUT``). Replicas that tie on
outstanding requests take turns, so a sequential client keeps every replica serving: the one a request fails over
to then has its pages and llama.cpp's prompt cache warm (measured on a loaded 2-core machine: 2.6 s for the first
short chat of a replica that had never served, 0.3-0.4 s for the next ones). The semantics are tabled in
doc/cluster.md.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

import xoscar as xo

from xinference import settings
from xinference.api.gateway.admission import Admission, Ticket
from xinference.core.reachability import probe_connect
from xinference.core.refs import ReplicaRef, SupervisorRef, local_replica_ref
from xinference.errors import ModelNotFound, ModelUnavailable, ReplicaUnreachable, XinferenceError

if TYPE_CHECKING:
    from xinference.api.gateway.keepalive import KeepAlive

__all__ = ["Replica", "Route", "RouteTable", "model_call"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds a replica found unreachable is skipped (unless no other is left) while the supervisor still lists it
SUSPECT_SECONDS = 30.0
#: the connect bound for the last replica a request can go to: waiting longer there beats failing the request, but
#: xoscar's own connect would hold its process-wide connect lock all that time (see ``core/reachability.py``)
LAST_REPLICA_CONNECT_TIMEOUT = 8.0
#: the order of picks, for taking turns between replicas that tie on outstanding requests
_PICKS = itertools.count(1)


@dataclass
class Replica:
    address: str
    ref: ReplicaRef
    outstanding: int = 0
    #: whether this API process has opened a connection to the replica (its connect is then no longer probed)
    reached: bool = False
    #: when it was last picked (``_PICKS``); 0 = never
    last_pick: int = 0


@dataclass
class Route:
    model_uid: str
    model_type: str
    model_ability: list[str]
    status: str = "ready"
    replicas: list[Replica] = field(default_factory=list)
    engine: str = ""
    #: keep_alive, max_queued, queue_timeout, slots (see ``api/gateway/admission.py`` and ``api/gateway/keepalive.py``)
    limits: dict[str, Any] = field(default_factory=dict)

    def drop(self, replica: Replica) -> None:
        """Stop routing to a replica found unreachable (until the next refresh says otherwise)."""
        self.replicas = [r for r in self.replicas if r is not replica]

    def pick(self, avoid: Collection[str] = ()) -> Replica:
        """The replica with the fewest outstanding requests, the least recently picked on a tie; replicas whose
        address is in ``avoid`` (found unreachable) only when every replica is."""
        if not self.replicas:
            raise ModelUnavailable(f"model {self.model_uid!r} is {self.status}, not serving yet; retry shortly")
        usable = [r for r in self.replicas if r.address not in avoid] or self.replicas
        replica = min(usable, key=lambda r: (r.outstanding, r.last_pick))
        replica.last_pick = next(_PICKS)
        return replica


async def model_call(routes: RouteTable, uid: str, call: Awaitable[T]) -> T:
    """Await an actor call on a model; a vanished model process becomes ReplicaUnreachable (503, which
    ``RouteTable.call`` retries on another replica), not a 500.

    Transport failures are: a refused or reset connection (``ConnectionError``, ``OSError``), the connection closed
    by the other side while the call was in flight (``xo.ServerClosed``: the process died mid-request), and an
    actor missing from the pool (``xo.ActorNotExist``: the pool is being torn down or was replaced)."""
    try:
        return await call
    except XinferenceError:
        raise
    except (xo.ServerClosed, xo.ActorNotExist, ConnectionError, OSError) as exc:
        routes.invalidate()
        raise ReplicaUnreachable(
            f"a replica of model {uid!r} is not reachable (its process may have died): {exc}"
        ) from None


class RouteTable:
    """Cache of the supervisor's routes, with reuse of replica objects (and their counters) across refreshes."""

    def __init__(self, supervisor: SupervisorRef) -> None:
        self._supervisor = supervisor
        self._routes: dict[str, Route] = {}
        self._version = -1
        self._stale = True
        #: the refresh under way (shared by every caller that needs one meanwhile) and how many have begun
        self._inflight: asyncio.Future[None] | None = None
        self._begun = 0
        self._inflight_number = 0
        #: bumped by ``invalidate``: a refresh that began before an invalidation does not clear ``_stale``
        self._invalidations = 0
        #: replica address → until when it is skipped: found unreachable, not yet dropped by the supervisor.
        self._suspect: dict[str, float] = {}
        #: per-model limits on running and waiting requests; keep-alive (set by the app) reloads unloaded models
        self.admission = Admission()
        self.keepalive: KeepAlive | None = None

    def mark_unreachable(self, address: str, seconds: float = SUSPECT_SECONDS) -> None:
        """Skip a replica whose process did not answer, until the supervisor's table catches up (or ``seconds``)."""
        self._suspect[address] = time.monotonic() + seconds

    def suspected(self) -> set[str]:
        """The addresses found unreachable less than ``SUSPECT_SECONDS`` ago."""
        now = time.monotonic()
        return {address for address, until in self._suspect.items() if until > now}

    async def get(self, model_uid: str) -> Route:
        route = self._routes.get(model_uid)
        if route is None or self._stale or not route.replicas:
            looked = self._begun
            joined = await self.refresh()
            route = self._routes.get(model_uid)
            if route is None and joined <= looked:
                # The refresh joined began before this lookup, so it may predate the model's launch: ask once more
                # (still shared with every other caller in the same position).
                await self.refresh()
                route = self._routes.get(model_uid)
        if route is None:
            raise ModelNotFound(
                f"model {model_uid!r} is not running; GET /v1/models lists the running models", param="model"
            )
        return route

    def all(self) -> list[Route]:
        """Every route as last refreshed."""
        return list(self._routes.values())

    async def admit(self, route: Route) -> tuple[Ticket, Route]:
        """Admit one request on ``route`` (429 beyond its limits), loading the model first when keep-alive
        unloaded it; the ticket is held until the response ends (``Ticket.leave``)."""
        gate = self.admission.gate(route.model_uid, route.engine, route.limits, len(route.replicas))
        ticket = await gate.enter()
        try:
            if not route.replicas:  # it may have loaded while this request waited its turn
                route = await self.get(route.model_uid)
            if self.keepalive is not None and self.keepalive.needs_load(route):
                route = await self.keepalive.ensure_loaded(route)
        except BaseException as exc:
            ticket.fail(exc)
            ticket.leave()
            raise
        return ticket, route

    def invalidate(self) -> None:
        self._stale = True
        self._invalidations += 1

    def in_flight(self, model_uid: str) -> int:
        """Requests this API process has open on ``model_uid``'s replicas now (0 when none or not routed yet)."""
        route = self._routes.get(model_uid)
        return sum(r.outstanding for r in route.replicas) if route is not None else 0

    async def refresh(self) -> int:
        """Rebuild the table from the supervisor, joining the refresh under way if there is one; returns the number
        of the refresh awaited (refreshes are numbered as they begin)."""
        task = self._inflight
        if task is None or task.done():
            self._begun += 1
            task = self._inflight = asyncio.ensure_future(self._load(self._invalidations))
            self._inflight_number = self._begun
        number = self._inflight_number
        # shielded: one caller's cancellation (its client left) must not cancel the refresh the others await
        await asyncio.shield(task)
        return number

    async def _load(self, invalidations: int) -> None:
        version, routes = await self._supervisor.get_routes()
        old = {r.address: r for route in self._routes.values() for r in route.replicas}
        fresh: dict[str, Route] = {}
        now = time.monotonic()
        self._suspect = {a: t for a, t in self._suspect.items() if t > now}
        for uid, info in routes.items():
            replicas = []
            addresses = [a for a in info["replicas"] if a not in self._suspect] or info["replicas"]
            for address in addresses:
                replica = old.get(address)
                if replica is None:
                    # A local reference: no round trip, so a dead replica cannot fail the refresh itself.
                    replica = Replica(address, local_replica_ref(address))
                replicas.append(replica)
            fresh[uid] = Route(
                uid,
                info["model_type"],
                list(info["model_ability"]),
                info["status"],
                replicas,
                info.get("model_engine", ""),
                dict(info.get("limits") or {}),
            )
        self._routes, self._version = fresh, version
        self._stale = invalidations != self._invalidations  # invalidated meanwhile: the next lookup refreshes
        self.admission.forget(set(fresh))

    async def watch(self, interval: float = 1.0) -> None:
        """Refresh whenever the supervisor's version moves (runs for the API's lifetime)."""
        while True:
            await asyncio.sleep(interval)
            try:
                if await self._supervisor.route_version() != self._version:
                    await self.refresh()
            except Exception:  # noqa: BLE001 - the supervisor may be restarting; retry next tick
                logger.debug("route refresh failed", exc_info=True)

    async def call(
        self, route: Route, call: Callable[[Replica], Awaitable[T]], ticket: Ticket | None = None
    ) -> tuple[T, Replica]:
        """Run ``call`` on the least-busy replica of ``route``, counting it as outstanding there meanwhile; when
        that replica's process is unreachable, skip it and try the next one. Returns the result and the replica.

        Without a ``ticket`` the call is admitted here (``admit``) and its ticket left when it returns."""
        if ticket is not None:
            return await self._call(route, call)
        ticket, route = await self.admit(route)
        try:
            result, replica = await self._call(route, call)
            if isinstance(result, dict):
                ticket.count_usage(result.get("usage"))
            return result, replica
        except BaseException as exc:
            ticket.fail(exc)
            raise
        finally:
            ticket.leave()

    async def _call(self, route: Route, call: Callable[[Replica], Awaitable[T]]) -> tuple[T, Replica]:
        """Try the replicas in ``pick`` order until one answers; each that is unreachable (refused, reset, closed
        mid-call, or silent past the connect bound) leaves ``route`` and is skipped by later requests too."""
        failure: ReplicaUnreachable | None = None
        for _ in range(max(1, len(route.replicas))):
            replica = route.pick(self.suspected())
            replica.outstanding += 1
            try:
                if not replica.reached:
                    await self._reach(route, replica)
                return await model_call(self, route.model_uid, call(replica)), replica
            except ReplicaUnreachable as exc:
                failure = exc
                route.drop(replica)
                self.mark_unreachable(replica.address)
                if not route.replicas:
                    break
            finally:
                replica.outstanding -= 1
        assert failure is not None
        raise failure

    async def _reach(self, route: Route, replica: Replica) -> None:
        """Check, within a bound, that ``replica`` accepts a connection before its first call (see
        ``core/reachability.py``): ``replica_connect_timeout`` while another replica could take the request,
        ``LAST_REPLICA_CONNECT_TIMEOUT`` for the last one not found unreachable already. Raises ReplicaUnreachable when
        it does not."""
        suspected = self.suspected()
        others = any(r is not replica and r.address not in suspected for r in route.replicas)
        timeout = settings.replica_connect_timeout() if others else LAST_REPLICA_CONNECT_TIMEOUT
        try:
            await probe_connect(replica.address, timeout)
        except OSError as exc:
            self.invalidate()
            raise ReplicaUnreachable(
                f"a replica of model {route.model_uid!r} is not reachable (its process or host may be down): {exc}"
            ) from None
        replica.reached = True
