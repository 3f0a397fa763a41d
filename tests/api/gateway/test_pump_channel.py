"""The pump pulls over the replica's stream channel when it offers one, and falls back to xoscar calls when it
does not or when the channel breaks, with no chunk lost or doubled.

The model actor and the pump are the real ones, in one event loop (the actor outside a pool, so the "xoscar"
side is a direct call that the test double ``CountingRef`` counts); the channel is a real Unix socket. The engine
is a test double whose streams the test feeds by hand.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.core import test_pull_many
from xinference.api.gateway.pump import Inbox, ReplicaPump
from xinference.core.model_actor import ModelActor
from xinference.core.stream_channel import ChannelServer
from xinference.errors import ContextLengthExceeded, EngineError, ReplicaUnreachable


class FedEngine(test_pull_many.FedEngine):
    """Test double of an engine (``tests/core/test_pull_many.py``'s), which the actor may also unload."""

    async def unload(self) -> None:
        pass


class CountingRef:
    """Test double of a replica ref: forwards to the real actor in this process and counts ``pull_many`` calls
    (what would be xoscar messages); ``channel_at`` overrides the channel the actor offers."""

    def __init__(self, actor: ModelActor, channel_at: Any = "actor") -> None:
        self._actor = actor
        self._channel_at = channel_at
        self.xoscar_pulls = 0

    async def pull_many(self, stream_ids: list[str], max_wait: float | None = None) -> Any:
        self.xoscar_pulls += 1
        return await self._actor.pull_many(stream_ids, max_wait)

    async def stream_channel(self) -> Any:
        if self._channel_at == "actor":
            return await self._actor.stream_channel()
        return self._channel_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self._actor, name)


async def _setup(channel_at: Any = "actor") -> tuple[ModelActor, FedEngine, CountingRef, ReplicaPump]:
    engine = FedEngine()
    actor = ModelActor(test_pull_many.PLAN)
    actor._engine = engine  # type: ignore[assignment]
    actor._stream_interval = 0.0
    ref = CountingRef(actor, channel_at)

    async def direct(call: Any) -> Any:
        return await call

    return actor, engine, ref, ReplicaPump(ref, direct, timeout=30.0, name="test replica")  # type: ignore[arg-type]


async def _read(inbox: Inbox, until: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < until:
        chunks, done = await asyncio.wait_for(inbox.get(), 10)
        got.extend(chunks)  # type: ignore[arg-type]
        if done:
            break
    return got


async def _streams_over_xoscar(actor: ModelActor, engine: FedEngine, ref: CountingRef, pump: ReplicaPump) -> None:
    """A stream of this actor reaches its inbox whole, and its rounds went as xoscar calls, not over a channel."""
    stream_id, _, _ = await actor.open_stream("chat", {})
    inbox = pump.add(stream_id)
    engine.streams[0].push(b'"a"')
    engine.streams[0].finish()
    assert await _read(inbox, 2) == [b'"a"']
    assert not pump.on_channel and ref.xoscar_pulls >= 1


def test_rounds_go_over_the_channel_and_carry_text_and_errors() -> None:
    async def scenario() -> None:
        actor, engine, ref, pump = await _setup()
        stream_id, first, done = await actor.open_stream("chat", {})
        assert first == [{"choices": [{"delta": {"role": "assistant"}}]}] and not done
        inbox = pump.add(stream_id)
        for index in range(5):
            engine.streams[0].push(f'{{"t":{index}}}'.encode())
            assert await _read(inbox, 1) == [f'{{"t":{index}}}'.encode()]
        assert pump.on_channel and ref.xoscar_pulls == 0 and pump.rounds >= 5
        engine.streams[0].push({"as": "dict"})
        engine.streams[0].finish(ContextLengthExceeded("the prompt is too long", param="messages"))
        assert await _read(inbox, 1) == [{"as": "dict"}]
        with pytest.raises(ContextLengthExceeded, match="too long") as raised:
            await asyncio.wait_for(inbox.get(), 10)
        assert raised.value.param == "messages"
        assert ref.xoscar_pulls == 0
        pump.close()
        await actor.__pre_destroy__()

    asyncio.run(scenario())


def test_a_broken_channel_hands_the_stream_to_xoscar_without_losing_a_chunk() -> None:
    async def scenario() -> None:
        actor, engine, ref, pump = await _setup()
        stream_id, _, _ = await actor.open_stream("chat", {})
        inbox = pump.add(stream_id)
        engine.streams[0].push(b'"a"')
        assert await _read(inbox, 1) == [b'"a"']
        assert pump.on_channel
        assert actor._channel is not None
        await actor._channel.close()  # the round waiting now sees the end of the channel
        await asyncio.sleep(0.05)
        engine.streams[0].push(b'"b"')
        engine.streams[0].push(b'"c"')
        engine.streams[0].finish()
        assert await _read(inbox, 3) == [b'"b"', b'"c"']
        assert not pump.on_channel and ref.xoscar_pulls >= 1
        await actor.__pre_destroy__()

    asyncio.run(scenario())


@pytest.mark.parametrize("where", ["off", "elsewhere", "wrong token"])
def test_without_a_usable_channel_rounds_stay_on_xoscar(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        if where == "off":
            monkeypatch.setenv("XINFERENCE_STREAM_CHANNEL", "0")
            channel_at: Any = "actor"
        elif where == "elsewhere":  # the replica runs on another host: its path does not exist here
            channel_at = ("/nonexistent/xinf-stream-x/channel", "t" * 32)
        else:
            channel_at = None
        actor, engine, ref, pump = await _setup(channel_at)
        if where == "wrong token":
            path, _ = await actor.stream_channel()  # type: ignore[misc]
            ref._channel_at = (path, "0" * 32)
        await _streams_over_xoscar(actor, engine, ref, pump)
        if where == "off":
            assert actor._channel is None  # nothing listens when the setting is off
        await actor.__pre_destroy__()

    asyncio.run(scenario())


class FrozenChannelRef:
    """Test double of a replica whose model process froze: its channel takes rounds and never answers them."""

    def __init__(self) -> None:
        self.server = ChannelServer(self._never)
        self.aborted: list[str] = []

    @staticmethod
    async def _never(stream_ids: list[str], wait: float) -> Any:
        await asyncio.Event().wait()

    async def stream_channel(self) -> tuple[str, str]:
        await self.server.start()
        return self.server.path, self.server.token

    async def abort(self, stream_id: str) -> bool:
        self.aborted.append(stream_id)
        return True


def test_a_round_over_the_channel_keeps_its_deadline() -> None:
    async def scenario() -> None:
        ref = FrozenChannelRef()

        async def direct(call: Any) -> Any:
            return await call

        timeouts: list[bool] = []
        pump = ReplicaPump(ref, direct, timeout=0.3, name="frozen", on_timeout=lambda: timeouts.append(True))  # type: ignore[arg-type]
        inbox = pump.add("s1")
        with pytest.raises(ReplicaUnreachable, match="frozen did not answer"):
            await asyncio.wait_for(inbox.get(), 10)
        assert timeouts == [True] and ref.aborted == ["s1"]
        assert not pump.on_channel  # an answer that comes late would answer the wrong round: dropped
        await ref.server.close()

    asyncio.run(scenario())


def test_a_channel_that_cannot_listen_leaves_rounds_on_xoscar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # a temporary folder whose path is too long for a Unix socket's address (about 108 bytes)
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))

    async def scenario() -> None:
        actor, engine, ref, pump = await _setup()
        assert await actor.stream_channel() is None
        await _streams_over_xoscar(actor, engine, ref, pump)
        await actor.__pre_destroy__()

    with caplog.at_level("WARNING"):
        asyncio.run(scenario())
    assert "stream channel did not open" in caplog.text
    assert list(deep.iterdir()) == []  # its folder was removed again


def test_a_chunk_that_cannot_cross_ends_its_stream_in_both_processes() -> None:
    async def scenario() -> None:
        actor, engine, ref, pump = await _setup()
        stream_id, _, _ = await actor.open_stream("chat", {})
        inbox = pump.add(stream_id)
        engine.streams[0].push({"not json": object()})
        with pytest.raises(EngineError, match="not JSON"):
            await asyncio.wait_for(inbox.get(), 10)
        assert pump.on_channel and stream_id not in actor._streams
        assert engine.streams[0].cancelled  # the engine stops generating for it
        await actor.__pre_destroy__()

    asyncio.run(scenario())
