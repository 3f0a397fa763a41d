"""llama.cpp's slot figures in ``stats()`` (and so ``xinference:engine_*`` in ``/metrics``), on the real bundled GGUF:
busy slots, requests waiting in llama.cpp's queue, and llama.cpp's own token counters read in-process."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import httpx
import pytest

from xinference.engines.base import ChunkStream
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.slots import ServerCounters, SlotLoad
from xinference.hardware import detect_hardware
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

SLOTS = 2
#: Long enough that no stream ends on its own while the test looks at it: every one is cancelled.
LONG = {
    "messages": [{"role": "user", "content": "Tell a long story about a lighthouse."}],
    "max_tokens": 900,
    "ignore_eos": True,
}


@pytest.fixture(scope="module")
def engine():
    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    engine = LlamaCppEngine(
        model_uid="unit-llama-slots",
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=resolve_model_path(spec, "Q4_1"),
        config=LlamaCppEngine.parse_config({"n_ctx": 4096, "n_parallel": SLOTS}),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    yield engine
    asyncio.run(engine.unload())


async def until(condition: Callable[[], bool], what: str, limit: float = 120.0) -> None:
    """Poll ``condition`` until it holds; the limit only keeps a broken engine from hanging the run."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


async def first_chunk(stream: ChunkStream) -> None:
    """Wait until the stream has produced output: its request holds a slot and decodes."""
    batch: list[Any] = []
    while not batch:
        batch, done = await stream.next_batch()
        assert not done, "the stream ended before the test looked at it"


def slots(engine: LlamaCppEngine) -> tuple[int, int, int]:
    stats = engine.stats()
    return stats["slots_total"], stats["slots_busy"], stats["requests_waiting"]


@pytest.mark.slow
def test_idle_engine_reports_free_slots(engine: LlamaCppEngine) -> None:
    assert slots(engine) == (SLOTS, 0, 0)


@pytest.mark.slow
def test_llama_counters_move_by_the_tokens_of_a_request(engine: LlamaCppEngine) -> None:
    """llama.cpp's own counters, read through the in-process metrics handler. Runs before the tests that cancel
    requests, so that nothing else is generating while it counts."""

    async def scenario() -> None:
        await until(lambda: "generation_tokens" in engine.stats(), "llama.cpp's counters were read")
        before = engine.stats()
        reply = await engine.chat(
            {
                "messages": [{"role": "user", "content": "Name a colour of the sea at dawn."}],
                "max_tokens": 7,
                "ignore_eos": True,
            }
        )
        assert reply["usage"]["completion_tokens"] == 7
        await until(
            lambda: engine.stats()["generation_tokens"] > before["generation_tokens"],
            "llama.cpp counted the generated tokens",
        )
        after = engine.stats()
        assert after["generation_tokens"] - before["generation_tokens"] == 7
        assert after["prompt_tokens"] + after["prompt_tokens_cached"] > (
            before["prompt_tokens"] + before["prompt_tokens_cached"]
        )
        assert after["decode_calls"] > before["decode_calls"]

    asyncio.run(scenario())


@pytest.mark.slow
@pytest.mark.parametrize("streams", [1, SLOTS])
def test_running_streams_fill_that_many_slots(engine: LlamaCppEngine, streams: int) -> None:
    async def scenario() -> None:
        running = [await engine.chat_stream(LONG) for _ in range(streams)]
        for stream in running:
            await first_chunk(stream)
        assert slots(engine) == (SLOTS, streams, 0)
        for stream in running:
            stream.cancel()
        await until(lambda: slots(engine)[1] == 0, "the cancelled streams left their slots")
        assert slots(engine) == (SLOTS, 0, 0)

    asyncio.run(scenario())


@pytest.mark.slow
def test_requests_past_the_slots_wait_then_take_a_freed_slot(engine: LlamaCppEngine) -> None:
    async def scenario() -> None:
        running = [await engine.chat_stream(LONG) for _ in range(SLOTS)]
        for stream in running:
            await first_chunk(stream)
        extra = [await engine.chat_stream(LONG), await engine.chat_stream(LONG)]
        assert slots(engine) == (SLOTS, SLOTS, 2)
        await asyncio.sleep(0.5)  # llama.cpp has had time to start them, were a slot free: none is
        assert not any(stream.has_output for stream in extra)
        assert slots(engine) == (SLOTS, SLOTS, 2)

        running[0].cancel()  # one slot frees: one waiting request takes it, the other keeps waiting
        await until(lambda: any(stream.has_output for stream in extra), "a waiting request got the freed slot")
        # the cancelled request's thread may still be returning from llama.cpp for a moment
        await until(lambda: slots(engine) == (SLOTS, SLOTS, 1), "one request left waiting")
        assert sum(stream.has_output for stream in extra) == 1

        for stream in running + extra:
            stream.cancel()
        await until(lambda: slots(engine)[1:] == (0, 0), "every request left llama.cpp")

    asyncio.run(scenario())


@pytest.mark.slow
def test_whole_response_call_holds_a_slot_while_it_runs(engine: LlamaCppEngine) -> None:
    async def scenario() -> None:
        call = asyncio.create_task(engine.chat(LONG))
        await until(lambda: slots(engine)[1] == 1 or call.done(), "the call took a slot")
        assert not call.done() and slots(engine) == (SLOTS, 1, 0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert slots(engine) == (SLOTS, 0, 0)

    asyncio.run(scenario())


@pytest.mark.slow
def test_llama_metrics_page_stays_locked(engine: LlamaCppEngine) -> None:
    """The metrics endpoint is on for the in-process reading; over HTTP it answers only with the engine's key."""
    address = engine._server.listening_address
    assert httpx.get(f"{address}/metrics", timeout=10).status_code == 401
    keyed = httpx.get(f"{address}/metrics", headers={"Authorization": f"Bearer {engine._api_key}"}, timeout=10)
    assert keyed.status_code == 200 and "llamacpp:tokens_predicted_total" in keyed.text


# -- the two counters on their own -------------------------------------------------------------------------------
def test_slot_load_splits_busy_from_waiting() -> None:
    load = SlotLoad(2)
    for _ in range(5):
        load.queue()
    for _ in range(3):
        load.start()
    assert load.snapshot() == {"slots_total": 2, "slots_busy": 2, "requests_waiting": 3}
    with load.running():
        assert load.snapshot() == {"slots_total": 2, "slots_busy": 2, "requests_waiting": 4}
    load.unqueue()
    load.end()
    load.end()
    assert load.snapshot() == {"slots_total": 2, "slots_busy": 1, "requests_waiting": 1}


def test_slow_llama_reading_returns_the_previous_one() -> None:
    """A reading llama.cpp has not answered within the wait leaves the scrape with the last one, and is kept for
    the next. ``stalling_reader`` is a test double standing for a llama.cpp loop busy with a long decode step."""
    release = threading.Event()
    readings: list[int] = []

    def stalling_reader() -> bytes:
        readings.append(len(readings))
        if len(readings) == 2:  # the second reading waits for the test
            release.wait(30)
        return f"llamacpp:tokens_predicted_total {4 * len(readings)}\n".encode()

    counters = ServerCounters(stalling_reader, "test", wait=0.05)
    try:
        counters.snapshot()
        assert counters._pending is not None
        counters._pending.result(timeout=30)  # the first reading is in, however slow this machine is
        assert counters.snapshot() == {"generation_tokens": 4.0}  # starts the second one, which stalls
        assert counters.snapshot() == {"generation_tokens": 4.0}  # still under way: no third reading
        assert len(readings) == 2
        release.set()
        counters._pending.result(timeout=30)
        assert counters.snapshot()["generation_tokens"] in (8.0, 12.0)  # the late reading, or a newer one
    finally:
        counters.close()


def test_llama_error_page_keeps_the_reading() -> None:
    """What llama.cpp answers when its metrics endpoint is off: an error object, which changes nothing."""
    pages = iter(["llamacpp:n_decode_total 3\n# HELP x\n", '{"error": {"code": 501, "message": "not supported"}}'])
    counters = ServerCounters(lambda: next(pages), "test", wait=5)
    try:
        assert counters.snapshot() == {"decode_calls": 3.0}
        assert counters.snapshot() == {"decode_calls": 3.0}
    finally:
        counters.close()
