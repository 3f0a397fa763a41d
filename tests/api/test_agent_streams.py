"""The Messages and Responses stream relays when the engine fails mid-stream or the client leaves.

A real model cannot be made to fail after its first chunk on demand, so the chat serving path is replaced by a
scripted double (``ScriptedGeneration``, test-only) that yields given batches and then raises or waits; everything
between it and the bytes on the wire is the real code.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from xinference.api.anthropic.protocol import MessagesRequest
from xinference.api.anthropic.serving import MessagesService
from xinference.api.openai.responses.protocol import ResponsesRequest
from xinference.api.openai.responses.serving import ResponsesService
from xinference.api.openai.responses.store import ResponseStore
from xinference.errors import EngineError


class ScriptedGeneration:
    """Test double of GenerationService.open: one stream of scripted batches, then ``error`` (or a long wait)."""

    def __init__(self, batches: list[list[dict[str, Any]]], error: Exception | None = None) -> None:
        self.batches = batches
        self.error = error
        self.closed = False

    async def prepare_images(self, model: str, messages: list[dict[str, Any]], names: list[str] | None = None) -> None:
        assert not names, "no image in these requests"

    async def open(
        self, kind: str, model: str, params: dict[str, Any], keep_alive: Any = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        assert params["stream"] and params["stream_options"] == {"include_usage": True}
        return self._run()

    async def _run(self) -> AsyncIterator[list[dict[str, Any]]]:
        try:
            for batch in self.batches:
                yield batch
            if self.error is not None:
                raise self.error
            await asyncio.sleep(3600)
        finally:
            self.closed = True


def _text(content: str) -> list[dict[str, Any]]:
    return [{"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}]


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in raw.decode().strip().split("\n\n"):
        name, data = frame.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


async def _collect(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([part async for part in stream])


def test_messages_stream_failure_is_an_anthropic_error_event() -> None:
    generation = ScriptedGeneration([_text("Hel")], EngineError("the engine died"))
    service = MessagesService(generation, routes=None)  # type: ignore[arg-type]
    request = MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    )

    async def run() -> bytes:
        stream = await service.create(request)
        assert not isinstance(stream, dict)
        return await _collect(stream)

    events = _events(asyncio.run(run()))
    assert [n for n, _ in events][:3] == ["message_start", "ping", "content_block_start"]
    name, payload = events[-1]
    assert name == "error" and payload == {
        "type": "error",
        "error": {"type": "api_error", "message": "the engine died"},
    }
    assert generation.closed


def test_responses_stream_failure_is_not_stored() -> None:
    store = ResponseStore()
    service = ResponsesService(ScriptedGeneration([_text("Hel")], EngineError("the engine died")), store)  # type: ignore[arg-type]
    request = ResponsesRequest.model_validate({"model": "m", "input": "Hi", "stream": True})

    async def run() -> bytes:
        stream = await service.create(request)
        assert not isinstance(stream, dict)
        return await _collect(stream)

    events = _events(asyncio.run(run()))
    assert [n for n, _ in events][-2:] == ["error", "response.failed"]
    assert events[-1][1]["response"]["error"]["message"] == "the engine died" and len(store) == 0


def test_client_leaving_closes_the_engine_stream() -> None:
    """Closing the relay (the client disconnected) closes the chat stream, which is what aborts the request."""
    generation = ScriptedGeneration([_text("Hel")])
    service = ResponsesService(generation, ResponseStore())  # type: ignore[arg-type]
    request = ResponsesRequest.model_validate({"model": "m", "input": "Hi", "stream": True})

    async def run() -> None:
        stream = await service.create(request)
        assert not isinstance(stream, dict)
        first = await stream.__anext__()
        assert b"response.created" in first
        await stream.__anext__()  # the text delta; the double now waits as a slow engine would
        await stream.aclose()  # type: ignore[attr-defined]

    asyncio.run(run())
    assert generation.closed
