"""A round of ``pull_many`` that the replica never answers (its host lost without a connection reset, its process
frozen) ends its streams with an error after ``XINFERENCE_STREAM_PULL_TIMEOUT`` and frees their admission slots.

The model actor is a stand-in (test double) whose rounds can be made to hang; the route table, admission gate,
generation service, pump and SSE relay are the real ones. The real model process frozen by SIGSTOP is in
``test_stream_interruptions.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from xinference.api.gateway.routes import Replica, Route, RouteTable
from xinference.api.openai.chat.serving import GenerationService
from xinference.errors import ReplicaUnreachable


class FreezableModelActor:
    """Test double of a model actor: streams open with a role chunk; ``pull_many`` hangs while ``frozen``."""

    def __init__(self) -> None:
        self.frozen = asyncio.Event()
        self.waits: list[float | None] = []
        self.aborted: list[str] = []
        self._opened = 0

    async def open_stream(self, kind: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]], bool]:
        self._opened += 1
        return f"s{self._opened}", [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}], False

    async def pull_many(self, stream_ids: list[str], max_wait: float | None = None) -> dict[str, Any]:
        self.waits.append(max_wait)
        if self.frozen.is_set():
            await asyncio.sleep(3600)  # never answers, as a stopped process
        await asyncio.sleep(min(max_wait or 0.01, 0.01))
        return {sid: ([{"choices": [{"index": 0, "delta": {"content": "t"}}]}], False, None) for sid in stream_ids}

    async def abort(self, stream_id: str) -> bool:
        self.aborted.append(stream_id)
        return True

    async def wake_pulls(self) -> None:
        return None


def _service(actor: FreezableModelActor) -> tuple[GenerationService, RouteTable]:
    table = RouteTable(supervisor=None)
    table._routes["m"] = Route(
        "m", "LLM", ["chat"], replicas=[Replica("10.0.0.9:1234", actor)], limits={"slots": 1, "max_queued": 0}
    )
    table._stale = False
    return GenerationService(table), table


def test_a_round_past_its_deadline_ends_the_stream_with_an_error_and_frees_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XINFERENCE_STREAM_PULL_TIMEOUT", "0.6")

    async def scenario() -> None:
        actor = FreezableModelActor()
        service, table = _service(actor)
        frames = service._relay("m", await service.open("chat", "m", {"messages": []}))
        first = await frames.__anext__()  # the role chunk
        assert b"assistant" in first
        gate = table.admission.gate("m", "", {}, 1)
        assert gate.running == 1
        actor.frozen.set()
        started = time.monotonic()
        rest = [frame async for frame in frames]
        waited = time.monotonic() - started
        assert 0.5 <= waited < 3, f"the stream ended after {waited:.1f}s, not at the 0.6 s deadline"
        body = b"".join(rest).decode()
        assert body.endswith("data: [DONE]\n\n")
        error = json.loads([line for line in body.split("\n") if '"error"' in line][-1][len("data: ") :])["error"]
        assert error["code"] == ReplicaUnreachable.code and error["type"] == "service_unavailable"
        assert "replica 10.0.0.9:1234 of model 'm' did not answer for 0.6 s" in error["message"]
        assert gate.running == 0  # the admission slot is free: another request gets in (max_queued is 0)
        await asyncio.sleep(0.01)
        assert actor.aborted == ["s1"]  # told to stop generating, for when it answers again
        assert all(wait is not None and wait <= 0.2 for wait in actor.waits)  # asked to answer within a third

    asyncio.run(scenario())


def test_a_replica_that_answers_every_round_is_never_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_STREAM_PULL_TIMEOUT", "0.3")

    async def scenario() -> None:
        actor = FreezableModelActor()
        service, _ = _service(actor)
        batches = await service.open("chat", "m", {"messages": []})
        count = 0
        deadline = time.monotonic() + 1.0  # three deadlines of rounds that each answer in time
        async for _ in batches:
            count += 1
            if time.monotonic() > deadline:
                break
        await batches.aclose()  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)
        assert count > 10 and actor.aborted == ["s1"]  # only by the client leaving at the end

    asyncio.run(scenario())
