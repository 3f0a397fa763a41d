"""Dynamic batching of concurrent embedding / rerank requests into shared forward passes.

Each request submits its list of inputs and awaits their results. A collector task takes every pending request
and runs the flattened inputs through the model in forward passes of at most ``max_batch_size`` inputs, on one
worker thread so the event loop stays free. While requests are concurrent it first waits for more to join: the
window stays open ``window_s`` after the latest arrival, so it grows only while requests keep arriving, and never
past ``max_window_s`` from the oldest one. Requests that arrive while a pass runs join the next one, so a busy model
batches naturally, and a lone client (one request at a time) never waits for company that is not coming.

A request's inputs stay together in one round; a request larger than ``max_batch_size`` is split over several
passes of the same round. ``stats`` counts the forward passes, so tests can observe batching without timing.

Up to ``rounds`` rounds are in flight at once (default: ``workers``, the executor's threads). With more rounds
than workers the extra ones wait their turn on the executor: the model's thread then never waits for a request's
round trip (the answer going back through the API, the client's next request coming in), because the next round
is formed and queued while the current one computes. Rounds with a free slot share what is queued: with two free
and 16 requests waiting each takes 8, and a slot that frees up later takes whatever queued meanwhile. With
``workers`` above one, rounds compute at once on their own threads (the model must be safe to call from several
threads).

Failures reach the caller as the platform's errors: a request that meets a closed batcher (the model is being
unloaded), queued or in a forward pass, gets :class:`~xinference.errors.ModelUnavailable` (503); whatever the
forward raises is raised to every request of its pass unchanged (the engine translates backend errors itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

from xinference.errors import EngineError, ModelUnavailable

__all__ = ["BatchStats", "Batcher"]

logger = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass
class BatchStats:
    """Counters of one batcher; read them with :meth:`Batcher.snapshot`."""

    #: forward passes started (a failed pass counts too)
    forward_passes: int = 0
    requests: int = 0
    inputs: int = 0
    #: the most requests that shared one forward pass
    max_requests_per_pass: int = 0
    #: forward passes that served more than one request
    shared_passes: int = 0
    #: rounds that waited for company (the window opened), and those that went at once
    windows_opened: int = 0
    rounds_without_window: int = 0
    #: the most rounds that were in flight at once (at most ``rounds``)
    max_parallel_passes: int = 0


@dataclass
class _Pending(Generic[In, Out]):
    inputs: list[In]
    future: asyncio.Future[list[Out]]
    arrived: float = field(default_factory=time.monotonic)


class Batcher(Generic[In, Out]):
    """Collects concurrent requests and runs them through ``forward`` together.

    ``forward(inputs)`` runs on a worker thread (``executor``, which should have ``workers`` threads; by default
    the batcher makes its own) and returns one result per input, in order; whatever it raises is raised to every
    request of that pass. ``rounds``: rounds in flight, at least ``workers``. Create and use the batcher on one
    event loop; ``close()`` when done.

    ``window_s`` is the quiet gap that closes the window (no arrival for that long), ``max_window_s`` (default:
    four gaps) the longest a round waits for company in all.
    """

    def __init__(
        self,
        forward: Callable[[list[In]], list[Out]],
        *,
        max_batch_size: int,
        window_s: float,
        max_window_s: float | None = None,
        executor: ThreadPoolExecutor | None = None,
        name: str = "batcher",
        workers: int = 1,
        rounds: int | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._forward = forward
        self.max_batch_size = max_batch_size
        self.window_s = max(0.0, window_s)
        self.max_window_s = max(self.window_s, 4 * self.window_s if max_window_s is None else max_window_s)
        self.workers = workers
        self.rounds = max(workers, rounds or workers)
        #: the rounds now in forward passes, one entry per busy worker
        self._serving: list[list[_Pending[In, Out]]] = []
        self._rounds: set[asyncio.Task[None]] = set()
        self._pending: list[_Pending[In, Out]] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        # One thread: torch runs fastest when every call comes from the same thread (its OpenMP team is reused).
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._closed = False
        self._name = name
        self._concurrent = True  # until a round shows otherwise, give the first requests the window
        self.stats = BatchStats()

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters, as a plain dict."""
        return dict(self.stats.__dict__)

    async def submit(self, inputs: list[In]) -> list[Out]:
        """Queue ``inputs`` (one request) and wait for their results."""
        if self._closed:
            raise self._closed_error()
        if not inputs:
            return []
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._run())
        future: asyncio.Future[list[Out]] = loop.create_future()
        self._pending.append(_Pending(list(inputs), future))
        assert self._wakeup is not None
        self._wakeup.set()
        return await future

    async def close(self) -> None:
        """Stop collecting; requests still queued or in a forward pass fail with ModelUnavailable. Idempotent.

        A forward pass already running on the worker thread is not interrupted (torch cannot be); its results are
        dropped.
        """
        self._closed = True
        serving = [p for round_ in self._serving for p in round_]  # rounds forget themselves as they are cancelled
        tasks = [t for t in (self._task, *self._rounds) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._rounds.clear()
        for pending in [*serving, *self._pending]:
            if not pending.future.done():
                pending.future.set_exception(self._closed_error())
        self._serving = []
        self._pending.clear()
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _closed_error(self) -> ModelUnavailable:
        return ModelUnavailable(
            f"{self._name}: the model is being unloaded; retry once it is running again", retry_after=1.0
        )

    # -- collector --------------------------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            self._drop_cancelled()
            if not self._pending or len(self._serving) >= self.rounds:
                continue  # a finishing round wakes the collector again
            await self._collect()
            round_ = self._take_round(self.rounds - len(self._serving))
            if not round_:
                continue
            if self.rounds == 1:
                await self._serve(round_)
            else:
                self._serving.append(round_)  # counted busy before its task first runs
                task = asyncio.get_running_loop().create_task(self._serve(round_, registered=True))
                self._rounds.add(task)
                task.add_done_callback(self._rounds.discard)
            if self._pending:
                self._wakeup.set()

    async def _collect(self) -> None:
        """Wait until no request arrived for ``window_s``, ``max_window_s`` passed since the oldest pending one
        arrived, or a full batch is queued.

        The window only opens while requests are concurrent (the previous round served several, or more came
        while it ran): a lone client sending one request at a time never waits.
        """
        assert self._wakeup is not None
        if not self._concurrent or self.window_s <= 0:
            self.stats.rounds_without_window += 1
            return
        self.stats.windows_opened += 1
        limit = self._pending[0].arrived + self.max_window_s
        while self._queued() < self.max_batch_size:
            deadline = min(self._pending[-1].arrived + self.window_s, limit)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _queued(self) -> int:
        return sum(len(p.inputs) for p in self._pending if not p.future.done())

    def _drop_cancelled(self) -> None:
        self._pending = [p for p in self._pending if not p.future.done()]

    def _take_round(self, idle: int = 1) -> list[_Pending[In, Out]]:
        """Whole requests up to ``max_batch_size`` inputs, and with ``idle`` free round slots up to an even share of
        what is queued, so the other free slots get the rest (always at least one request)."""
        self._drop_cancelled()
        limit = self.max_batch_size
        if idle > 1:
            limit = min(limit, -(-self._queued() // idle))
        taken: list[_Pending[In, Out]] = []
        size = 0
        while self._pending:
            nxt = self._pending[0]
            if taken and size + len(nxt.inputs) > limit:
                break
            taken.append(self._pending.pop(0))
            size += len(nxt.inputs)
        return taken

    async def _serve(self, round_: list[_Pending[In, Out]], registered: bool = False) -> None:
        if not registered:
            self._serving.append(round_)
        self.stats.max_parallel_passes = max(self.stats.max_parallel_passes, len(self._serving))
        try:
            await self._serve_round(round_)
        finally:
            with contextlib.suppress(ValueError):
                self._serving.remove(round_)
            if self._wakeup is not None and self._pending:
                self._wakeup.set()

    async def _serve_round(self, round_: list[_Pending[In, Out]]) -> None:
        flat: list[In] = []
        owners: list[int] = []
        for index, pending in enumerate(round_):
            flat.extend(pending.inputs)
            owners.extend([index] * len(pending.inputs))
        loop = asyncio.get_running_loop()
        results: list[Out] = []
        try:
            for start in range(0, len(flat), self.max_batch_size):
                chunk = flat[start : start + self.max_batch_size]
                self._count(len(set(owners[start : start + self.max_batch_size])), len(chunk))
                out = await loop.run_in_executor(self._executor, self._forward, chunk)
                if len(out) != len(chunk):
                    raise EngineError(f"{self._name}: the model returned {len(out)} results for {len(chunk)} inputs")
                results.extend(out)
        except Exception as exc:  # noqa: BLE001 - the forward's error belongs to every request of the round
            for pending in round_:
                if not pending.future.done():
                    pending.future.set_exception(exc)
            return
        offset = 0
        for pending in round_:
            size = len(pending.inputs)
            if not pending.future.done():
                pending.future.set_result(results[offset : offset + size])
            offset += size
        self.stats.requests += len(round_)
        self._concurrent = len(round_) > 1 or bool(self._pending) or len(self._serving) > 1

    def _count(self, requests: int, inputs: int) -> None:
        stats = self.stats
        stats.forward_passes += 1
        stats.inputs += inputs
        stats.max_requests_per_pass = max(stats.max_requests_per_pass, requests)
        if requests > 1:
            stats.shared_passes += 1
