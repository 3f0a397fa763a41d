"""Issue 13, item 5: the model actor's stale-stream reaper only takes streams nobody reads, and says so.

The model actor is the real one (created directly, outside a pool); its engine is a test double whose stream
hands out one chunk and then waits for the test, like a request queued behind ``max_num_seqs``. Streams are made
"old" by moving their last-pull time back, and the real reaper loop runs with a short period.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import ModelActor
from xinference.engines.base import ChunkStream
from xinference.errors import RequestInterrupted

PLAN = LaunchPlan(
    model_uid="m", replica_uid="m-0", model_engine="test", family={}, spec={}, quantization="none", engine_config={}
)


class HeldStreamEngine:
    """Test double of an engine: each stream yields one chunk, then nothing until ``release``."""

    def __init__(self) -> None:
        self.streams: list[ChunkStream] = []

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        stream = ChunkStream()
        stream.push({"choices": [{"delta": {"role": "assistant"}}]})
        self.streams.append(stream)
        return stream

    def release(self) -> None:
        for stream in self.streams:
            stream.push({"choices": [{"delta": {"content": "late"}}]})
            stream.finish()


def _actor(engine: HeldStreamEngine) -> ModelActor:
    actor = ModelActor(PLAN)
    actor._engine = engine  # type: ignore[assignment]
    return actor


async def _reap_for_a_while(actor: ModelActor, until: Any = None) -> None:
    """Run the real reaper loop for some sweeps (or until ``until()`` holds)."""
    task = asyncio.create_task(actor._reap_stale_streams())
    try:
        for _ in range(100):
            await asyncio.sleep(0.01)
            if until is not None and until():
                break
    finally:
        task.cancel()


def test_a_pull_waiting_for_tokens_is_not_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_STALE_STREAM_SECONDS", "0.04")

    async def scenario() -> None:
        engine = HeldStreamEngine()
        actor = _actor(engine)
        stream_id, _, done = await actor.open_stream("chat", {})
        assert not done
        pull = asyncio.create_task(actor.pull(stream_id))
        await asyncio.sleep(0)
        actor._streams[stream_id].last_pull -= 1000  # the pull has been waiting for a long time
        await _reap_for_a_while(actor)
        assert not engine.streams[0].cancelled, "the reaper aborted a stream whose pull was in flight"
        engine.release()
        batch, _ = await pull
        assert batch and batch[-1]["choices"][0]["delta"]["content"] == "late"

    asyncio.run(scenario())


def test_a_reaped_stream_ends_with_an_error_not_a_clean_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_STALE_STREAM_SECONDS", "0.04")

    async def scenario() -> None:
        engine = HeldStreamEngine()
        actor = _actor(engine)
        stream_id, _, _ = await actor.open_stream("chat", {})
        actor._streams[stream_id].last_pull -= 1000  # nobody has pulled it for long
        await _reap_for_a_while(actor, until=lambda: stream_id not in actor._streams)
        assert engine.streams[0].cancelled  # the engine stops generating for nobody
        with pytest.raises(RequestInterrupted, match=r"stream s\d+ of model 'm' was not read for \d+ s and was ended"):
            await actor.pull(stream_id)

    asyncio.run(scenario())
