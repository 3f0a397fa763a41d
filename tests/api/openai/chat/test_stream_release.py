"""A stream's counters come back even when its iterator is dropped unread (issue 13, item 9).

The model actor is a stand-in (test double) answering ``open_stream``/``pull``/``abort``; the route table,
admission gate and generation service are the real ones.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from xinference.api.gateway.routes import Replica, Route, RouteTable
from xinference.api.openai.chat.serving import GenerationService


class StandInModelActor:
    """Test double of a model actor: every stream opens with one chunk and never ends by itself."""

    def __init__(self) -> None:
        self.aborted: list[str] = []

    async def open_stream(self, kind: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]], bool]:
        return "s1", [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}], False

    async def pull(self, stream_id: str) -> tuple[list[dict[str, Any]], bool]:
        await asyncio.sleep(3600)
        return [], True

    async def abort(self, stream_id: str) -> bool:
        self.aborted.append(stream_id)
        return True


def test_an_unread_stream_gives_back_its_replica_slot_and_admission_ticket() -> None:
    async def scenario() -> tuple[int, int, list[str]]:
        actor = StandInModelActor()
        table = RouteTable(supervisor=None)
        replica = Replica("stand-in", actor)
        table._routes["m"] = Route("m", "LLM", ["chat"], replicas=[replica])
        table._stale = False
        service = GenerationService(table)
        batches = await service.open("chat", "m", {"messages": []})
        assert replica.outstanding == 1
        del batches  # e.g. the client left before the response started: nobody iterates or closes it
        gc.collect()
        for _ in range(3):
            await asyncio.sleep(0)
        gate = table.admission.gate("m", "", {}, 1)
        return replica.outstanding, gate.running, actor.aborted

    outstanding, running, aborted = asyncio.run(scenario())
    assert outstanding == 0 and running == 0
    assert aborted == ["s1"]  # the engine is told to stop the request too
