"""The registry of requests running under an id (``api/gateway/requests.py``), without a server: what an abort
does to a whole response and to a stream, blocked ids and their expiry, duplicates, and cleanup."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import pytest

from xinference.api.gateway.requests import RunningRequests
from xinference.errors import InvalidRequest, RequestAborted


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_abort_cancels_a_whole_response() -> None:
    async def main() -> None:
        running = RunningRequests()
        cancelled = asyncio.Event()

        async def work() -> str:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        entry = running.start("m", "r")
        task = asyncio.ensure_future(running.run(entry, work()))
        await asyncio.sleep(0.01)
        assert running.abort("m", "r", 0) is True
        with pytest.raises(RequestAborted, match="'r' of model 'm' was aborted"):
            await task
        assert cancelled.is_set() and len(running) == 0

    asyncio.run(main())


def test_a_response_that_finishes_first_is_returned() -> None:
    async def main() -> None:
        running = RunningRequests()

        async def work() -> str:
            return "done"

        assert await running.run(running.start("m", "r"), work()) == "done"
        assert await running.run(None, work()) == "done"
        assert len(running) == 0 and running.abort("m", "r", 0) is False

    asyncio.run(main())


def test_abort_ends_a_stream_after_the_batches_taken_and_closes_it() -> None:
    async def main() -> None:
        running = RunningRequests()
        closed = asyncio.Event()

        async def batches() -> AsyncIterator[int]:
            try:
                yield 1
                await asyncio.sleep(60)
                yield 2
            finally:
                closed.set()

        stream = running.stream(running.start("m", "s"), batches())
        assert await stream.__anext__() == 1
        reader = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.01)
        assert running.abort("m", "s", 0)
        with pytest.raises(RequestAborted):
            await reader
        assert closed.is_set() and len(running) == 0

    asyncio.run(main())


def test_a_stream_that_ends_is_released() -> None:
    async def main() -> None:
        running = RunningRequests()

        async def batches() -> AsyncIterator[int]:
            yield 1
            yield 2

        assert [b async for b in running.stream(running.start("m", "s"), batches())] == [1, 2]
        assert len(running) == 0
        unregistered = batches()
        assert running.stream(None, unregistered) is unregistered

    asyncio.run(main())


def test_a_stream_dropped_unread_frees_its_id() -> None:
    async def main() -> None:
        running = RunningRequests()

        async def batches() -> AsyncIterator[int]:
            yield 1

        stream = running.stream(running.start("m", "s"), batches())
        assert len(running) == 1
        del stream
        gc.collect()
        assert len(running) == 0

    asyncio.run(main())


def test_blocked_ids_expire_and_duplicates_are_refused() -> None:
    async def main() -> None:
        clock = Clock()
        running = RunningRequests(clock)
        assert running.abort("m", "r", 30) is False
        with pytest.raises(RequestAborted) as blocked:
            running.start("m", "r")
        assert blocked.value.param == "request_id" and blocked.value.status_code == 409
        running.start("other-model", "r")  # ids are per model
        clock.now += 30
        entry = running.start("m", "r")
        with pytest.raises(InvalidRequest, match="already used"):
            running.start("m", "r")
        running.finish(entry)
        running.start("m", "r")

    asyncio.run(main())
