"""Requests sent under a ``request_id``, so that ``POST /v1/models/{uid}/requests/{request_id}/abort`` can stop them.

Xinference's clients name a request by putting ``request_id`` in its body (``generate_config={"request_id":
...}``) and abort it by that id. Every chat and text completion passes through this API process, so the registry
lives here: a running request registers how to stop it (a whole response: its task is cancelled, which cancels the
actor call and the engine drops the request; a stream: it ends with an error frame and the model actor aborts it,
as on a client disconnect). An abort also blocks the id for ``block_duration`` seconds, so a request that arrives
just after its own abort (the two raced) is refused as well instead of running to the end.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Callable, TypeVar

from xinference.errors import InvalidRequest, RequestAborted

__all__ = ["MAX_BLOCK_SECONDS", "RunningRequest", "RunningRequests"]

T = TypeVar("T")
#: the longest ``block_duration`` an abort may ask for
MAX_BLOCK_SECONDS = 3600
#: ids remembered as blocked at most (the oldest are forgotten first): clients choose ids, so it must be bounded
_MAX_BLOCKED = 10_000


class RunningRequest:
    """One request registered under its id; ``aborted`` resolves with the error once it is aborted."""

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.aborted: asyncio.Future[RequestAborted] = asyncio.get_running_loop().create_future()

    def abort(self) -> None:
        if not self.aborted.done():
            model_uid, request_id = self.key
            self.aborted.set_result(RequestAborted(f"request {request_id!r} of model {model_uid!r} was aborted"))


class RunningRequests:
    """The requests running under an id, and the ids blocked by a recent abort."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._running: dict[tuple[str, str], RunningRequest] = {}
        self._blocked: OrderedDict[tuple[str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._running)

    def start(self, model_uid: str, request_id: str) -> RunningRequest:
        """Register a request; refused when its id was just aborted (409) or is used by a running request (400)."""
        key = (model_uid, request_id)
        self._forget_expired()
        if key in self._blocked:
            raise RequestAborted(f"request {request_id!r} of model {model_uid!r} was aborted", param="request_id")
        if key in self._running:
            raise InvalidRequest(
                f"request_id {request_id!r} is already used by a running request of model {model_uid!r}",
                param="request_id",
            )
        entry = RunningRequest(key)
        self._running[key] = entry
        return entry

    def finish(self, entry: RunningRequest) -> None:
        if self._running.get(entry.key) is entry:
            del self._running[entry.key]

    def abort(self, model_uid: str, request_id: str, block_duration: float) -> bool:
        """Abort the request running under this id, if any (True), and block the id for ``block_duration`` s."""
        key = (model_uid, request_id)
        if block_duration > 0:
            self._blocked[key] = self._clock() + block_duration
            self._blocked.move_to_end(key)
            while len(self._blocked) > _MAX_BLOCKED:
                self._blocked.popitem(last=False)
        entry = self._running.get(key)
        if entry is None:
            return False
        entry.abort()
        return True

    def _forget_expired(self) -> None:
        now = self._clock()
        for key in [k for k, until in self._blocked.items() if until <= now]:
            del self._blocked[key]

    # -- running work so that an abort stops it ------------------------------------------------------------------------
    async def run(self, entry: RunningRequest | None, work: Awaitable[T]) -> T:
        """Await ``work`` (a whole response) for the request ``entry`` (from :meth:`start`; None: no id, nothing
        to abort); an abort cancels it and raises :class:`RequestAborted`."""
        if entry is None:
            return await work
        task = asyncio.ensure_future(work)
        try:
            waited: set[asyncio.Future[Any]] = {task, entry.aborted}
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                await _cancelled(task)
                raise entry.aborted.result()
            return task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self.finish(entry)

    def stream(self, entry: RunningRequest | None, batches: AsyncIterator[T]) -> AsyncIterator[T]:
        """``batches`` (a stream's chunk batches, already open) for the request ``entry``: an abort ends it with
        :class:`RequestAborted` after the batches already taken, and closes ``batches`` (which makes the model
        actor abort the request in the engine)."""
        if entry is None:
            return batches
        stream = self._stream(entry, batches)
        # A stream dropped before its first read never runs its ``finally``: free the id then.
        weakref.finalize(stream, self.finish, entry)
        return stream

    async def _stream(self, entry: RunningRequest, batches: AsyncIterator[T]) -> AsyncIterator[T]:
        try:
            while not entry.aborted.done():
                step = asyncio.ensure_future(batches.__anext__())
                try:
                    waited: set[asyncio.Future[Any]] = {step, entry.aborted}
                    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                except BaseException:
                    step.cancel()
                    raise
                if not step.done():
                    await _cancelled(step)
                    break
                try:
                    batch = step.result()
                except StopAsyncIteration:
                    return
                yield batch
            raise entry.aborted.result()
        finally:
            self.finish(entry)
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                await aclose()


async def _cancelled(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended (its outcome no longer matters: the request was aborted)."""
    task.cancel()
    try:
        await task
    except BaseException:  # noqa: BLE001 - cancelled for the abort; whatever it raised meanwhile is moot
        pass
