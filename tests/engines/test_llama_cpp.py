"""The llama.cpp adapter in-process, on the real bundled GGUF: load, chat, stream batching, abort, unload."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlparse

import httpx
import pytest

from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.errors import ContextLengthExceeded
from xinference.hardware import detect_hardware
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry


@pytest.fixture(scope="module")
def engine():
    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    engine = LlamaCppEngine(
        model_uid="unit-llama",
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=resolve_model_path(spec, "Q4_1"),
        config=LlamaCppEngine.parse_config({"n_ctx": 2048}),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    yield engine
    asyncio.run(engine.unload())


def test_chat_names_the_uid_not_the_file(engine: LlamaCppEngine) -> None:
    reply = asyncio.run(engine.chat({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}))
    assert reply["model"] == "unit-llama" and "timings" not in reply
    assert reply["usage"]["completion_tokens"] == 4


@pytest.fixture(scope="module")
def one_slot_engine():
    """One decoding slot: a follow-up request can only run once the cancelled one has left its slot."""
    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    engine = LlamaCppEngine(
        model_uid="unit-llama-1slot",
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=resolve_model_path(spec, "Q4_1"),
        config=LlamaCppEngine.parse_config({"n_ctx": 2048, "n_parallel": 1}),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    yield engine
    asyncio.run(engine.unload())


def cancel_scenario(engine: LlamaCppEngine, cancel: bool = True) -> tuple[float, float]:
    """Stream a long reply, cancel it after a few tokens, then ask again on the only slot.

    Returns (seconds per streamed token, seconds the follow-up took). A cancel that does not free the slot makes
    the follow-up wait for the rest of the 400 tokens, hundreds of token-times; the bound is in token-times
    measured on this run, so a busy machine slows both sides alike.
    """

    async def scenario() -> tuple[float, float]:
        stream = await engine.chat_stream(
            {"messages": [{"role": "user", "content": "Tell a long story."}], "max_tokens": 400, "ignore_eos": True}
        )
        received = 0
        await stream.next_batch()  # the first token: the prompt is processed
        started = time.monotonic()
        while received < 20:
            batch, _ = await stream.next_batch()
            received += len(batch)
        per_token = (time.monotonic() - started) / received
        if cancel:
            stream.cancel()
        started = time.monotonic()
        await engine.chat({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        return per_token, time.monotonic() - started

    return asyncio.run(scenario())


def test_stream_cancel_frees_the_only_slot(one_slot_engine: LlamaCppEngine) -> None:
    per_token, waited = cancel_scenario(one_slot_engine)
    assert waited < 100 * per_token, f"the follow-up waited {waited:.1f}s, {waited / per_token:.0f} token-times"


def test_cancelled_non_streamed_call_frees_the_only_slot(one_slot_engine: LlamaCppEngine) -> None:
    """Item 7 of issue 13: cancelling a whole-response call (its client left) stops the generation."""

    async def scenario() -> tuple[float, float]:
        long = {"messages": [{"role": "user", "content": "Tell a long story."}], "ignore_eos": True}
        started = time.monotonic()
        await one_slot_engine.chat({**long, "max_tokens": 16})
        per_token = (time.monotonic() - started) / 16
        call = asyncio.create_task(one_slot_engine.chat({**long, "max_tokens": 400}))
        await asyncio.sleep(10 * per_token)
        call.cancel()
        started = time.monotonic()
        await one_slot_engine.chat({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        return per_token, time.monotonic() - started

    per_token, waited = asyncio.run(scenario())
    assert waited < 100 * per_token, f"the follow-up waited {waited:.1f}s, {waited / per_token:.0f} token-times"


def test_prompt_over_context(engine: LlamaCppEngine) -> None:
    with pytest.raises(ContextLengthExceeded, match="2048"):
        asyncio.run(engine.chat({"messages": [{"role": "user", "content": "hello " * 3000}], "max_tokens": 2}))


def test_llama_http_port_is_loopback_and_locked(engine: LlamaCppEngine) -> None:
    address = urlparse(engine._server.listening_address)
    assert address.hostname == "127.0.0.1"
    response = httpx.post(
        f"{engine._server.listening_address}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}]},
        timeout=5,
    )
    assert response.status_code == 401
