"""A replica that stops serving ends every request it has with an error naming why, never with a clean end.

The model actor is the real one, created outside a pool; its engine is a test double whose streams and whole
responses the test holds open, so that the stop lands mid-request deterministically. The same paths on a real
server with the bundled model are in ``tests/api/test_stream_interruptions.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import ModelActor
from xinference.engines.base import ChunkStream
from xinference.errors import EngineError, ReplicaUnreachable, RequestInterrupted

PLAN = LaunchPlan(
    model_uid="m", replica_uid="m-0", model_engine="test", family={}, spec={}, quantization="none", engine_config={}
)


def _token(text: str) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}}]}


class HeldEngine:
    """Test double of an engine: streams open with a role chunk and then get what the test pushes; a whole
    response returns partial text once ``unload`` runs (as an engine cut short would); health can be failed."""

    def __init__(self) -> None:
        self.streams: list[ChunkStream] = []
        self.unloaded = asyncio.Event()
        self.health_error: str | None = None

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        stream = ChunkStream()
        stream.push({"choices": [{"delta": {"role": "assistant"}}]})
        self.streams.append(stream)
        return stream

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        await self.unloaded.wait()
        return {"choices": [{"message": {"content": "half an ans"}, "finish_reason": "stop"}]}

    async def unload(self) -> None:
        for stream in self.streams:
            stream.finish()  # an engine ends its streams cleanly when it stops: the actor must not pass that on
        self.unloaded.set()

    async def check_health(self) -> None:
        if self.health_error is not None:
            raise EngineError(self.health_error)


def _actor() -> tuple[ModelActor, HeldEngine]:
    engine = HeldEngine()
    actor = ModelActor(PLAN)
    actor._engine = engine  # type: ignore[assignment]
    return actor, engine


def test_a_stop_ends_a_waiting_round_with_the_reason_after_the_chunks_made_so_far() -> None:
    async def scenario() -> None:
        actor, engine = _actor()
        stream_id, _, _ = await actor.open_stream("chat", {})
        engine.streams[0].push(_token("half"))
        assert (await actor.pull_many([stream_id]))[stream_id] == ([_token("half")], False, None)
        waiting = asyncio.create_task(actor.pull_many([stream_id]))
        await asyncio.sleep(0)
        engine.streams[0].push(_token(" an"))
        assert await actor.stop_serving("model 'm' was unloaded") == 1
        chunks, done, error = (await waiting)[stream_id]
        assert chunks == [_token(" an")] and done
        assert isinstance(error, RequestInterrupted) and error.message == "model 'm' was unloaded"
        late = (await actor.pull_many([stream_id]))[stream_id]  # a round that arrives after the stop
        assert late[1] and isinstance(late[2], RequestInterrupted) and late[2].message == "model 'm' was unloaded"
        assert engine.streams[0].cancelled  # the engine stops generating

    asyncio.run(scenario())


def test_a_whole_response_in_flight_fails_with_the_reason_and_new_requests_go_elsewhere() -> None:
    async def scenario() -> None:
        actor, _ = _actor()
        call = asyncio.create_task(actor.chat({}))
        await asyncio.sleep(0)
        await actor.unload("replica m-0 was removed (scale-down)")
        with pytest.raises(RequestInterrupted, match=r"replica m-0 was removed \(scale-down\)"):
            await call
        with pytest.raises(ReplicaUnreachable, match="is stopping"):  # retried on another replica by the API
            await actor.open_stream("chat", {})

    asyncio.run(scenario())


def test_destroyed_without_a_reason_the_streams_still_end_with_an_error() -> None:
    async def scenario() -> None:
        actor, _ = _actor()
        stream_id, _, _ = await actor.open_stream("chat", {})
        waiting = asyncio.create_task(actor.pull_many([stream_id]))
        await asyncio.sleep(0)
        await actor.__pre_destroy__()
        _, done, error = (await waiting)[stream_id]
        assert done and isinstance(error, RequestInterrupted)
        assert error.message == "replica m-0 of model 'm' was stopped"

    asyncio.run(scenario())


def test_after_a_failed_health_check_the_reason_names_the_restart() -> None:
    async def scenario() -> None:
        actor, engine = _actor()
        stream_id, _, _ = await actor.open_stream("chat", {})
        engine.health_error = "the vLLM server died"
        with pytest.raises(EngineError):
            await actor.check_health()
        await actor.__pre_destroy__()  # the worker now restarts the replica
        _, done, error = (await actor.pull_many([stream_id]))[stream_id]
        assert isinstance(error, RequestInterrupted)
        assert error.message == ("replica m-0 is restarting after a failed health check: the vLLM server died")

    asyncio.run(scenario())


def test_a_stream_opening_during_the_stop_fails_before_its_first_byte() -> None:
    async def scenario() -> None:
        actor, engine = _actor()

        async def silent_stream(request: dict[str, Any]) -> ChunkStream:
            stream = ChunkStream()  # no first chunk yet: a long prefill
            engine.streams.append(stream)
            return stream

        engine.chat_stream = silent_stream  # type: ignore[method-assign]
        opening = asyncio.create_task(actor.open_stream("chat", {}))
        await asyncio.sleep(0)
        await actor.stop_serving("model 'm' was unloaded")
        with pytest.raises(RequestInterrupted, match="was unloaded"):
            await opening

    asyncio.run(scenario())
