"""ChunkStream hand-off pieces used by ``pull_many``: ``wait_any``, ``take`` and the direct wake on the loop."""

from __future__ import annotations

import asyncio
import threading

from xinference.engines.base import ChunkStream, wait_any


def test_wait_any_returns_when_any_of_many_streams_moves() -> None:
    async def scenario() -> None:
        streams = [ChunkStream() for _ in range(5)]
        waiting = asyncio.create_task(wait_any(streams))
        await asyncio.sleep(0)
        assert not waiting.done()
        pusher = threading.Thread(target=lambda: streams[3].push({"i": 3}))  # an engine thread
        pusher.start()
        pusher.join()
        await asyncio.wait_for(waiting, 30)
        assert [s.take() for s in streams] == [None, None, None, ([{"i": 3}], False), None]
        assert all(s._waiter is None for s in streams)  # the others were disarmed

    asyncio.run(scenario())


def test_wait_any_stops_at_the_callers_future_and_at_its_timeout() -> None:
    async def scenario() -> None:
        stream = ChunkStream()
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(wait_any([stream], None, stop))
        await asyncio.sleep(0)
        stop.set_result(None)
        await asyncio.wait_for(waiting, 30)
        await wait_any([stream], 0.001)  # returns by itself
        assert stream.take() is None

    asyncio.run(scenario())


def test_a_push_on_the_loop_thread_wakes_the_consumer_without_a_thread_hand_off() -> None:
    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        handed_off = 0
        original = loop.call_soon_threadsafe

        def counting(*args: object) -> object:
            nonlocal handed_off
            handed_off += 1
            return original(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        stream = ChunkStream()
        batch = asyncio.create_task(stream.next_batch())
        await asyncio.sleep(0)
        stream.push({"a": 1})  # a producer task on the loop (the Transformers and MLX engines)
        assert await batch == ([{"a": 1}], False)
        ending = asyncio.create_task(stream.next_batch())
        await asyncio.sleep(0)
        stream.finish()
        assert await ending == ([], True)
        return handed_off

    assert asyncio.run(scenario()) == 0


def test_take_raises_the_error_after_the_chunks_before_it() -> None:
    async def scenario() -> None:
        stream = ChunkStream()
        stream.push({"a": 1})
        stream.finish(ValueError("boom"))
        assert stream.has_output and stream.take() == ([{"a": 1}], False)
        try:
            stream.take()
        except ValueError:
            pass
        else:
            raise AssertionError("the error was lost")
        assert stream.take() == ([], True)

    asyncio.run(scenario())


def test_cancel_interrupts_a_producer_blocked_outside_the_stream() -> None:
    """The abort hook: a producer task waiting on something else (an upstream server) is cancelled with the
    stream, once, and a hook given after the cancel runs at once; a failing hook does not stop the others."""

    async def scenario() -> None:
        stream = ChunkStream()
        upstream = asyncio.Event()  # never set: the producer blocks here, never looking at `cancelled`

        async def produce() -> None:
            await upstream.wait()
            stream.push({"never": True})

        producer = asyncio.create_task(produce())
        calls: list[str] = []

        def failing() -> None:
            calls.append("failing")
            raise RuntimeError("hook failed")

        stream.on_cancel(failing)
        stream.on_cancel(producer.cancel)
        stream.on_cancel(lambda: calls.append("second"))
        await asyncio.sleep(0)
        stream.cancel()
        stream.cancel()  # a second cancel runs nothing again
        await asyncio.gather(producer, return_exceptions=True)
        assert producer.cancelled()
        assert calls == ["failing", "second"]
        assert stream.finished and await stream.next_batch() == ([], True)
        stream.on_cancel(lambda: calls.append("late"))
        assert calls[-1] == "late"

    asyncio.run(scenario())
