"""One pump per replica reads all of its streams with one ``pull_many`` per round (issue 14, item 1).

The model actor is a stand-in (test double) that the test drives step by step, like an engine decoding all of its
streams in one step; the route table, admission gate, generation service and pump are the real ones. Progress is
counted in event-loop turns and calls, never in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

import pytest

from xinference.api.gateway.routes import Replica, Route, RouteTable
from xinference.api.openai.chat.serving import GenerationService
from xinference.errors import EngineError


def _token(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


class SteppedModelActor:
    """Test double of a model actor: ``step()`` gives every open stream its next chunk, as one decoding step."""

    def __init__(self) -> None:
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.failed: dict[str, Exception] = {}
        self.ended: set[str] = set()
        self.aborted: list[str] = []
        self.calls: list[list[str]] = []
        self.wakes = 0
        self._moved = asyncio.Event()
        self._opened = 0

    async def open_stream(self, kind: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]], bool]:
        self._opened += 1
        stream_id = f"s{self._opened}"
        self.pending[stream_id] = []
        return stream_id, [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}], False

    def step(self, text: str) -> None:
        for chunks in self.pending.values():
            chunks.append(_token(text))
        self._moved.set()

    def fail(self, stream_id: str, error: Exception) -> None:
        self.failed[stream_id] = error
        self._moved.set()

    def end(self, stream_id: str) -> None:
        self.ended.add(stream_id)
        self._moved.set()

    async def pull_many(
        self, stream_ids: list[str], max_wait: float | None = None
    ) -> dict[str, tuple[list[dict[str, Any]], bool, Any]]:
        self.calls.append(list(stream_ids))
        while True:
            out: dict[str, tuple[list[dict[str, Any]], bool, Any]] = {}
            for sid in stream_ids:
                if sid in self.failed:
                    out[sid] = ([], True, self.failed.pop(sid))
                    self.pending.pop(sid, None)
                elif sid not in self.pending:
                    out[sid] = ([], True, None)
                elif self.pending[sid] or sid in self.ended:
                    chunks, self.pending[sid] = self.pending[sid], []
                    done = sid in self.ended
                    if done:
                        del self.pending[sid]
                    out[sid] = (chunks, done, None)
            if out:
                return out
            wakes = self.wakes
            self._moved.clear()
            await self._moved.wait()
            if self.wakes != wakes:  # ended by wake_pulls
                return {}

    async def wake_pulls(self) -> None:
        self.wakes += 1
        self._moved.set()

    async def abort(self, stream_id: str) -> bool:
        self.aborted.append(stream_id)
        self.pending.pop(stream_id, None)
        self._moved.set()
        return True


def _service(actor: SteppedModelActor) -> tuple[GenerationService, Replica]:
    table = RouteTable(supervisor=None)
    replica = Replica("stand-in", actor)
    table._routes["m"] = Route("m", "LLM", ["chat"], replicas=[replica], limits={"slots": 64})
    table._stale = False
    return GenerationService(table), replica


async def _turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


class Reader:
    """Reads one stream's batches in a task of its own, as the SSE relay does."""

    def __init__(self, batches: AsyncIterator[list[dict[str, Any]]]) -> None:
        self.batches = batches
        self.texts: list[str] = []
        self.error: BaseException | None = None
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for batch in self.batches:
                self.texts.extend(c["choices"][0]["delta"].get("content", "") for c in batch)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            self.error = exc


def test_many_streams_take_one_pull_per_step_not_one_per_stream() -> None:
    async def scenario() -> None:
        actor = SteppedModelActor()
        service, replica = _service(actor)
        readers = [Reader(await service.open("chat", "m", {"messages": []})) for _ in range(8)]
        await _turns()
        calls_before = len(actor.calls)
        for step in range(10):
            actor.step(f"t{step}")
            await _turns()
        steps_calls = len(actor.calls) - calls_before
        assert steps_calls <= 11, f"{steps_calls} pulls for 10 steps of 8 streams: not one per step"
        assert all(len(call) == 8 for call in actor.calls[-5:])
        for sid in list(actor.pending):
            actor.end(sid)
        await asyncio.wait_for(asyncio.gather(*(r.task for r in readers)), 30)
        assert all(r.texts == ["", *(f"t{i}" for i in range(10))] and r.error is None for r in readers)
        assert replica.outstanding == 0

    asyncio.run(scenario())


def test_a_failing_stream_does_not_break_the_others() -> None:
    async def scenario() -> None:
        actor = SteppedModelActor()
        service, _ = _service(actor)
        readers = [Reader(await service.open("chat", "m", {"messages": []})) for _ in range(3)]
        await _turns()
        actor.step("a")
        await _turns()
        actor.fail("s2", EngineError("the engine failed this request"))
        await _turns()
        actor.step("b")
        await _turns()
        for sid in list(actor.pending):
            actor.end(sid)
        await asyncio.wait_for(asyncio.gather(*(r.task for r in readers)), 30)
        assert isinstance(readers[1].error, EngineError) and readers[1].texts == ["", "a"]
        assert readers[0].texts == readers[2].texts == ["", "a", "b"]
        assert readers[0].error is None and readers[2].error is None

    asyncio.run(scenario())


def test_a_stream_closed_early_is_aborted_and_dropped_from_the_rounds() -> None:
    async def scenario() -> None:
        actor = SteppedModelActor()
        service, replica = _service(actor)
        leaving = await service.open("chat", "m", {"messages": []})
        staying = Reader(await service.open("chat", "m", {"messages": []}))
        async with contextlib.aclosing(leaving):  # type: ignore[type-var]
            await leaving.__anext__()  # the role chunk
            actor.step("x")
            assert [c["choices"][0]["delta"]["content"] for c in await leaving.__anext__()] == ["x"]
        await _turns()
        assert actor.aborted == ["s1"]
        actor.step("y")
        await _turns()
        assert actor.calls[-1] == ["s2"]
        actor.end("s2")
        await asyncio.wait_for(staying.task, 30)
        assert staying.texts == ["", "x", "y"] and replica.outstanding == 0

    asyncio.run(scenario())


def test_a_stream_opened_while_a_round_waits_joins_at_once() -> None:
    async def scenario() -> None:
        actor = SteppedModelActor()
        service, _ = _service(actor)
        first = Reader(await service.open("chat", "m", {"messages": []}))
        await _turns()
        assert actor.calls == [["s1"]]  # a round is waiting on the first stream alone
        actor.pending["s1"] = []  # ... which is stuck (a long prefill): only new streams will produce
        second = Reader(await service.open("chat", "m", {"messages": []}))
        await _turns()
        assert actor.wakes == 1 and actor.calls[-1] == ["s1", "s2"]
        actor.pending["s2"].append(_token("new"))
        actor._moved.set()
        await _turns()
        assert second.texts == ["", "new"]
        for sid in ("s1", "s2"):
            actor.end(sid)
        await asyncio.wait_for(asyncio.gather(first.task, second.task), 30)

    asyncio.run(scenario())


@pytest.mark.parametrize("broken", [ConnectionError("gone")])
def test_a_round_that_fails_as_a_whole_ends_its_streams_with_a_503(broken: Exception) -> None:
    async def scenario() -> list[BaseException | None]:
        actor = SteppedModelActor()

        async def unreachable(stream_ids: list[str], max_wait: float | None = None) -> Any:
            raise broken

        actor.pull_many = unreachable  # type: ignore[method-assign]
        service, replica = _service(actor)
        readers = [Reader(await service.open("chat", "m", {"messages": []})) for _ in range(2)]
        await asyncio.wait_for(asyncio.gather(*(r.task for r in readers)), 30)
        assert replica.outstanding == 0
        return [r.error for r in readers]

    errors = asyncio.run(scenario())
    assert all(getattr(e, "status_code", None) == 503 for e in errors)
