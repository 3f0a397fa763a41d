"""Admission control: how many requests a model runs at once, how many may wait, and for how long.

One :class:`Gate` per model uid, kept by the API next to its route table. A model runs at most ``capacity``
requests at once (its engine's slots: llama.cpp's ``n_parallel``, ``max_num_seqs``, ... summed over its replicas);
up to ``max_queued`` more wait, first come first served, each for at most ``queue_timeout`` seconds. Beyond either
limit the request is refused with :class:`~xinference.errors.TooManyRequests` (429 and ``Retry-After``) while the
admitted ones keep being served: a queue is never unbounded.

Every admitted request holds a :class:`Ticket` until its response (or stream) ends. The ticket is also what the
metrics read (queue time, time to first token, tokens, outcome): the data path pays a few attribute stores per
request and one check per streamed batch, never work per token.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from typing import Any, Protocol

from xinference import settings
from xinference.core.launch import DEFAULT_SLOTS, slots_of
from xinference.errors import TooManyRequests, XinferenceError

__all__ = [
    "DEFAULT_SLOTS",
    "Admission",
    "Gate",
    "MetricsSink",
    "Ticket",
    "current_route",
    "slots_of",
]

#: The HTTP route a request came in on (set by the metrics middleware; read when a ticket is issued).
current_route: contextvars.ContextVar[str] = contextvars.ContextVar("xinference_route", default="")


class MetricsSink(Protocol):
    """What the API's metrics do with a finished ticket (see ``xinference/api/metrics.py``)."""

    def finished(self, ticket: Ticket) -> None: ...

    def rejected(self, model: str, engine: str, route: str, reason: str) -> None: ...


class Ticket:
    """One admitted request, from admission to its last byte. ``leave()`` is idempotent."""

    __slots__ = (
        "admitted",
        "engine",
        "error",
        "first_token",
        "gate",
        "left",
        "model",
        "outcome",
        "prompt_tokens",
        "queued",
        "route",
        "generation_tokens",
        "started",
        "streamed",
    )

    def __init__(self, gate: Gate, route: str, queued: float) -> None:
        self.gate = gate
        self.model = gate.model
        self.engine = gate.engine
        self.route = route
        self.started = time.monotonic() - queued
        self.admitted = self.started + queued
        self.queued = queued
        self.first_token: float | None = None
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.streamed = False
        self.outcome = "success"
        self.error = ""
        self.left = False

    def mark_first_token(self) -> None:
        if self.first_token is None:
            self.first_token = time.monotonic()

    def count_usage(self, usage: dict[str, Any] | None) -> None:
        """Take the token counts of an OpenAI ``usage`` object (a response's, or a stream's last chunk's)."""
        if usage:
            self.prompt_tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
            self.generation_tokens = int(usage.get("completion_tokens") or 0)

    def fail(self, exc: BaseException) -> None:
        """Record why the request failed (the outcome follows the error's HTTP status)."""
        if isinstance(exc, XinferenceError):
            self.outcome = "client_error" if exc.status_code < 500 else "server_error"
            self.error = exc.code or type(exc).__name__
        elif isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
            self.outcome, self.error = "aborted", ""
        else:
            self.outcome, self.error = "server_error", type(exc).__name__

    def leave(self) -> None:
        if not self.left:
            self.left = True
            self.gate.release(self)


class Gate:
    """The admission state of one model; lives in the API's event loop (no locks: nothing here awaits)."""

    def __init__(
        self,
        model: str,
        engine: str = "",
        capacity: int = DEFAULT_SLOTS,
        max_queued: int = 0,
        queue_timeout: float = 120.0,
        sink: MetricsSink | None = None,
    ) -> None:
        self.model = model
        self.engine = engine
        self.capacity = max(1, capacity)
        self.max_queued = max(0, max_queued)
        self.queue_timeout = queue_timeout
        self.running = 0
        self.rejected = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._sink = sink
        #: when the model last had nothing running or waiting (keep-alive reads it); None while busy
        self.idle_since: float | None = time.monotonic()
        #: mean seconds a request held its slot (exponentially weighted), for a useful ``Retry-After``
        self._mean_hold = 1.0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> bool:
        return self.running > 0 or bool(self._waiters)

    def configure(self, engine: str, capacity: int, max_queued: int, queue_timeout: float) -> None:
        """New limits from a route refresh (a replica added or removed changes the capacity)."""
        self.engine = engine
        self.capacity, self.max_queued, self.queue_timeout = max(1, capacity), max(0, max_queued), queue_timeout
        while self._waiters and self.running < self.capacity:
            self.running += 1  # a new slot, given to a waiter by _pass_on (or taken back if none waits)
            self._pass_on()

    def retry_after(self) -> float:
        """Seconds until a slot is likely free: the queue ahead, served ``capacity`` at a time."""
        return min(60.0, max(1.0, self._mean_hold * (self.waiting + 1) / self.capacity))

    async def enter(self, route: str | None = None) -> Ticket:
        """Admit a request now, or after waiting its turn; TooManyRequests when the queue is full or the wait
        exceeds ``queue_timeout``."""
        route = route if route is not None else current_route.get()
        if self.running < self.capacity and not self._waiters:
            self.running += 1
            self.idle_since = None
            return Ticket(self, route, 0.0)
        if len(self._waiters) >= self.max_queued:
            self._refuse(route, "queue_full")
            raise TooManyRequests(
                f"model {self.model!r} is busy: {self.running} requests running and {self.waiting} waiting "
                f"(max_queued={self.max_queued}); retry later",
                retry_after=self.retry_after(),
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.idle_since = None
        began = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.queue_timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done() and not waiter.cancelled():
                self._pass_on()  # handed a slot just as it gave up: give the slot to the next one
            else:
                waiter.cancel()
                self._forget(waiter)
            if isinstance(exc, asyncio.CancelledError):
                raise
            self._refuse(route, "queue_timeout")
            raise TooManyRequests(
                f"model {self.model!r} stayed busy for {self.queue_timeout:g}s (queue_timeout); retry later",
                retry_after=self.retry_after(),
            ) from None
        return Ticket(self, route, time.monotonic() - began)

    def release(self, ticket: Ticket) -> None:
        held = time.monotonic() - ticket.admitted
        self._mean_hold = 0.8 * self._mean_hold + 0.2 * held
        if self._sink is not None:
            self._sink.finished(ticket)
        self._pass_on()

    def _pass_on(self) -> None:
        """A slot is free: it goes to the oldest request still waiting, or back to the pool."""
        if self.running <= self.capacity:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # the slot changes hands; ``running`` stays
                    return
        self.running = max(0, self.running - 1)
        if self.running == 0:
            self.idle_since = time.monotonic()

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass
        if not self.busy:
            self.idle_since = time.monotonic()

    def _refuse(self, route: str, reason: str) -> None:
        self.rejected += 1
        if self._sink is not None:
            self._sink.rejected(self.model, self.engine, route, reason)


class Admission:
    """Every model's gate, created on first use and reconfigured from the route table's limits."""

    def __init__(self, sink: MetricsSink | None = None) -> None:
        self.gates: dict[str, Gate] = {}
        self.sink = sink

    def gate(self, model: str, engine: str, limits: dict[str, Any], replicas: int) -> Gate:
        """The gate of ``model`` with limits from its launch (``max_queued``, ``queue_timeout``) or the server's
        defaults, and a capacity of its slots times ``replicas``."""
        capacity = int(limits.get("slots") or DEFAULT_SLOTS) * max(1, replicas)
        queued = limits.get("max_queued")
        if queued is None:
            queued = settings.max_queued()
        if queued is None:
            queued = 4 * capacity
        timeout = float(limits.get("queue_timeout") or settings.queue_timeout())
        gate = self.gates.get(model)
        if gate is None:
            gate = self.gates[model] = Gate(model, engine, capacity, int(queued), timeout, self.sink)
        elif (gate.capacity, gate.max_queued, gate.queue_timeout, gate.engine) != (capacity, queued, timeout, engine):
            gate.configure(engine, capacity, int(queued), timeout)
        return gate

    def forget(self, keep: set[str]) -> None:
        """Drop the gates of models that are gone (terminated), unless requests still hold them."""
        for model in [m for m, g in self.gates.items() if m not in keep and not g.busy]:
            del self.gates[model]
