"""ModelActor.pull_many: one round hands out the chunks of many streams (issue 14, item 1 and 2).

The model actor is the real one, created outside a pool; its engine is a test double whose streams the test feeds
by hand. Waits are counted in event-loop turns, not seconds; the gather window is set long so that a loaded
machine cannot end a round early.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from xinference.core import model_actor as model_actor_module
from xinference.core.cpu_headroom import CpuHeadroom
from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import ModelActor
from xinference.engines.base import ChunkStream
from xinference.errors import EngineError

PLAN = LaunchPlan(
    model_uid="m", replica_uid="m-0", model_engine="test", family={}, spec={}, quantization="none", engine_config={}
)


class FedEngine:
    """Test double of an engine: each stream opens with a role chunk, then gets what the test pushes."""

    def __init__(self) -> None:
        self.streams: list[ChunkStream] = []

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        stream = ChunkStream()
        stream.push({"choices": [{"delta": {"role": "assistant"}}]})
        self.streams.append(stream)
        return stream


def _token(text: str) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}}]}


async def _opened(count: int) -> tuple[ModelActor, FedEngine, list[str]]:
    engine = FedEngine()
    actor = ModelActor(PLAN)
    actor._engine = engine  # type: ignore[assignment]
    ids = [(await actor.open_stream("chat", {}))[0] for _ in range(count)]
    return actor, engine, ids


async def _turns(task: asyncio.Task[Any], turns: int = 50) -> bool:
    for _ in range(turns):
        if task.done():
            return True
        await asyncio.sleep(0)
    return task.done()


@pytest.fixture(autouse=True)
def long_gather_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_actor_module, "GATHER_WINDOW_SECONDS", 600.0)
    monkeypatch.setattr(model_actor_module.settings, "stream_interval", lambda: 0.0)


def test_one_round_returns_the_chunks_of_every_stream_that_has_some() -> None:
    async def scenario() -> None:
        actor, engine, ids = await _opened(3)
        for index, stream in enumerate(engine.streams):
            stream.push(_token(f"t{index}"))
        pulled = await actor.pull_many(ids)
        assert {
            sid: [c["choices"][0]["delta"]["content"] for c in chunks] for sid, (chunks, _, _) in pulled.items()
        } == {ids[0]: ["t0"], ids[1]: ["t1"], ids[2]: ["t2"]}
        assert all(not done and error is None for _, done, error in pulled.values())

    asyncio.run(scenario())


def test_a_lone_producing_stream_is_handed_out_at_once() -> None:
    async def scenario() -> None:
        actor, engine, ids = await _opened(2)
        engine.streams[0].push(_token("a"))
        await actor.pull_many(ids)  # only the first stream produced: the next round does not wait for the second
        round_two = asyncio.create_task(actor.pull_many(ids))
        await asyncio.sleep(0)
        engine.streams[0].push(_token("b"))
        assert await _turns(round_two), "a round held back the only producing stream's token"
        assert list(round_two.result()) == [ids[0]]

    asyncio.run(scenario())


def test_a_round_waits_for_every_stream_that_produced_last_round() -> None:
    async def scenario() -> None:
        actor, engine, ids = await _opened(2)
        for stream in engine.streams:
            stream.push(_token("x"))
        await actor.pull_many(ids)  # both produced
        round_two = asyncio.create_task(actor.pull_many(ids))
        await asyncio.sleep(0)
        engine.streams[0].push(_token("a"))
        assert not await _turns(round_two), "the round left before the other producing stream's token"
        engine.streams[1].push(_token("b"))
        assert await _turns(round_two)
        assert sorted(round_two.result()) == sorted(ids)  # one message carries both

    asyncio.run(scenario())


def test_a_failing_stream_ends_alone() -> None:
    async def scenario() -> None:
        actor, engine, ids = await _opened(2)
        engine.streams[0].push(_token("last words"))
        engine.streams[0].finish(EngineError("the engine crashed on this request"))
        engine.streams[1].push(_token("fine"))
        first = await actor.pull_many(ids)
        chunks, done, error = first[ids[0]]  # the chunks before the error, then the error, in the same round
        assert chunks == [_token("last words")] and done and isinstance(error, EngineError)
        assert first[ids[1]] == ([_token("fine")], False, None)
        assert ids[0] not in actor._streams and ids[1] in actor._streams
        engine.streams[1].push(_token("still"))
        assert (await actor.pull_many([ids[1]]))[ids[1]] == ([_token("still")], False, None)

    asyncio.run(scenario())


def test_an_aborted_stream_comes_back_done_and_the_others_go_on() -> None:
    async def scenario() -> None:
        actor, engine, ids = await _opened(2)
        waiting = asyncio.create_task(actor.pull_many(ids))
        await asyncio.sleep(0)
        assert await actor.abort(ids[0])
        assert await _turns(waiting)
        assert waiting.result() == {ids[0]: ([], True, None)} and engine.streams[0].cancelled
        engine.streams[1].push(_token("on"))
        assert (await actor.pull_many(ids)) == {ids[0]: ([], True, None), ids[1]: ([_token("on")], False, None)}

    asyncio.run(scenario())


def test_wake_pulls_ends_a_waiting_round_empty() -> None:
    async def scenario() -> None:
        actor, _, ids = await _opened(1)
        waiting = asyncio.create_task(actor.pull_many(ids))
        await asyncio.sleep(0)
        assert not await _turns(waiting, 5)
        assert actor._streams[ids[0]].pulling == 1  # a stream in a waiting round is being read: never reaped
        await actor.wake_pulls()
        assert await _turns(waiting) and waiting.result() == {}
        assert actor._streams[ids[0]].pulling == 0

    asyncio.run(scenario())


class _Host:
    """Test double of the host's CPU counters: cumulative busy seconds and a clock the test moves."""

    def __init__(self, busy_cores: float) -> None:
        self.busy_cores = busy_cores
        self.now = 0.0
        self.busy = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.busy += self.busy_cores * seconds

    def headroom(self) -> CpuHeadroom:
        return CpuHeadroom(period=0.5, busy_seconds=lambda: self.busy, cores=2.0, clock=lambda: self.now)


@pytest.mark.parametrize("busy_cores, spaced", [(2.0, True), (0.2, False)])
def test_the_adaptive_interval_spaces_rounds_only_while_the_host_has_no_cpu_to_spare(
    monkeypatch: pytest.MonkeyPatch, busy_cores: float, spaced: bool
) -> None:
    monkeypatch.setattr(model_actor_module.settings, "stream_interval", lambda: None)
    monkeypatch.setattr(model_actor_module.settings, "busy_stream_interval", lambda: 600.0)

    async def scenario() -> None:
        actor, engine, ids = await _opened(1)
        host = _Host(busy_cores)
        actor._headroom = host.headroom()
        host.advance(1.0)  # one sample's worth of history: the engine kept `busy_cores` busy
        engine.streams[0].push(_token("a"))
        assert await actor.pull_many(ids)  # the first round has no earlier round to be spaced from
        engine.streams[0].push(_token("b"))
        second = asyncio.ensure_future(actor.pull_many(ids))
        assert await _turns(second) is not spaced
        second.cancel()

    asyncio.run(scenario())


def test_a_fixed_interval_overrides_the_adaptive_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_actor_module.settings, "stream_interval", lambda: 600.0)

    async def scenario() -> None:
        actor, engine, ids = await _opened(1)
        host = _Host(0.0)  # an idle host: the adaptive interval would be 0
        actor._headroom = host.headroom()
        host.advance(1.0)
        engine.streams[0].push(_token("a"))
        assert await actor.pull_many(ids)
        engine.streams[0].push(_token("b"))
        second = asyncio.ensure_future(actor.pull_many(ids))
        assert not await _turns(second)
        second.cancel()

    asyncio.run(scenario())


def test_a_new_streams_first_text_is_not_held_back_by_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_actor_module.settings, "stream_interval", lambda: 600.0)

    async def scenario() -> None:
        actor, engine, ids = await _opened(1)
        engine.streams[0].push(_token("a"))
        assert await actor.pull_many(ids)  # a round just happened: the next one is due in 600 s
        ids.append((await actor.open_stream("chat", {}))[0])
        engine.streams[1].push(_token("first"))
        round_with_new = asyncio.ensure_future(actor.pull_many(ids))
        assert await _turns(round_with_new)  # the new stream's first text goes out at once
        assert [c["choices"][0]["delta"]["content"] for c in round_with_new.result()[ids[1]][0]] == ["first"]
        engine.streams[1].push(_token("second"))
        later = asyncio.ensure_future(actor.pull_many(ids))
        assert not await _turns(later)  # from then on it is spaced like the others
        later.cancel()

    asyncio.run(scenario())


def test_wake_pulls_ends_a_round_waiting_out_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_actor_module.settings, "stream_interval", lambda: 600.0)

    async def scenario() -> None:
        actor, engine, ids = await _opened(1)
        engine.streams[0].push(_token("a"))
        assert await actor.pull_many(ids)
        waiting = asyncio.ensure_future(actor.pull_many(ids))
        assert not await _turns(waiting)
        await actor.wake_pulls()
        assert await _turns(waiting)

    asyncio.run(scenario())
