"""The engine contract pieces that do not need a backend: ChunkStream batching, config parsing, matching."""

from __future__ import annotations

import asyncio
import threading

import pytest

from xinference.engines.base import ChunkStream
from xinference.engines.llama_cpp.config import ALL_LAYERS, DEFAULT_CPU_SLOTS, MAX_DEFAULT_CTX, LlamaCppConfig
from xinference.engines.llama_cpp.engine import LlamaCppEngine, error_from_llama
from xinference.engines.matcher import choose_engine
from xinference.engines.registry import get_engine_class, resolve_engine_name
from xinference.errors import ContextLengthExceeded, EngineError, EngineRejected, InvalidRequest
from xinference.hardware import detect_hardware
from xinference.model.registry import ModelRegistry


def test_chunk_stream_batches_everything_since_last_pull() -> None:
    async def scenario() -> list[list[int]]:
        stream = ChunkStream()
        produced = threading.Event()

        def producer() -> None:
            for i in range(100):
                stream.push({"i": i})
            produced.set()
            stream.finish()

        threading.Thread(target=producer).start()
        await asyncio.to_thread(produced.wait)
        batches = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            batches.append([c["i"] for c in batch])
        return batches

    batches = asyncio.run(scenario())
    assert batches == [list(range(100))]  # one pull, not a hundred


def test_chunk_stream_wakes_a_waiting_consumer_and_raises_errors_after_chunks() -> None:
    async def scenario() -> tuple[list, BaseException | None]:
        stream = ChunkStream()
        loop = asyncio.get_running_loop()
        loop.call_later(
            0.05,
            lambda: threading.Thread(
                target=lambda: (stream.push({"a": 1}), stream.finish(EngineError("boom")))
            ).start(),
        )
        first, done = await stream.next_batch()
        got: list = list(first)
        error = None
        try:
            while not done:
                more, done = await stream.next_batch()
                got.extend(more)
        except EngineError as exc:
            error = exc
        return got, error

    got, error = asyncio.run(scenario())
    assert got == [{"a": 1}] and isinstance(error, EngineError)


def test_chunk_stream_cancel_is_seen_by_producer() -> None:
    async def scenario() -> tuple[bool, list, bool]:
        stream = ChunkStream()
        stream.push({"x": 1})
        stream.cancel()
        stream.push({"ignored": True})
        batch, done = await stream.next_batch()
        return stream.cancelled, batch, done

    cancelled, batch, done = asyncio.run(scenario())
    assert cancelled and batch == [{"x": 1}] and done


def test_llama_config_defaults_are_sized_to_the_machine() -> None:
    resolved = LlamaCppConfig().resolve(cpu_count=2, context_length=32768, gpu=False)
    assert resolved.n_parallel == DEFAULT_CPU_SLOTS and resolved.n_threads == 2
    assert resolved.n_ctx == MAX_DEFAULT_CTX and resolved.n_gpu_layers == 0
    # on a GPU an unset n_gpu_layers starts from every layer; the engine narrows it to what fits in free VRAM
    assert LlamaCppConfig(n_ctx=1024).resolve(cpu_count=8, context_length=None, gpu=True).n_gpu_layers == ALL_LAYERS


def test_llama_config_rejects_unknown_and_bad_values() -> None:
    with pytest.raises(InvalidRequest, match="n_ctxx"):
        LlamaCppEngine.parse_config({"n_ctxx": 1})
    with pytest.raises(InvalidRequest, match="n_parallel"):
        LlamaCppEngine.parse_config({"n_parallel": 0})
    assert LlamaCppEngine.parse_config({"n_ctx": "4096"}).n_ctx == 4096  # CLI values arrive as text


def test_llama_errors_are_translated() -> None:
    error = error_from_llama(
        {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9031, "n_ctx": 8192, "message": "..."}
    )
    assert isinstance(error, ContextLengthExceeded) and "9031" in error.message and "8192" in error.message
    assert isinstance(
        error_from_llama({"code": 400, "message": "bad", "type": "invalid_request_error"}), InvalidRequest
    )
    assert isinstance(error_from_llama({"code": 500, "message": "oops"}), EngineError)


def test_engine_names_are_case_insensitive() -> None:
    assert resolve_engine_name("LLAMA.CPP") == "llama.cpp"
    assert get_engine_class("llama.cpp") is LlamaCppEngine
    with pytest.raises(InvalidRequest, match="unknown engine"):
        resolve_engine_name("warp")


def test_matcher_picks_llama_cpp_for_gguf_and_explains_pytorch() -> None:
    registry = ModelRegistry()
    family = registry.get("smollm2-instruct")
    hardware = detect_hardware()
    chosen = choose_engine(None, registry.choices(family), hardware)
    assert chosen.engine == "llama.cpp" and chosen.accepted[0].spec.model_format == "ggufv2"
    with pytest.raises(EngineRejected, match="only runs ggufv2"):
        choose_engine("llama.cpp", registry.choices(family, model_format="pytorch"), hardware)
