"""llama.cpp's streamed token chunks leave the engine thread as JSON text with only the model renamed (xllamacpp's
bytes callback, no dict per token), while the first chunk (role content), the last (timings, usage) and errors
are still decoded and fixed. xllamacpp's streaming call is replaced by a replay (``replay``, test-only) of chunk
texts exactly as it hands them over; ``tests/api/openai/chat/test_stream_passthrough_e2e.py`` runs the real one."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from xinference.engines.base import Chunk, chunk_dicts
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.slots import SlotLoad
from xinference.engines.llama_cpp.speculative import SpeculationCounters
from xinference.errors import XinferenceError
from xinference.hardware import detect_hardware
from xinference.model.registry import ModelRegistry

PATH = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


def _text(chunk: dict[str, Any]) -> bytes:
    return json.dumps(chunk, separators=(",", ":")).encode()


def _chunk(delta: dict[str, Any], **extra: Any) -> bytes:
    return _text({"choices": [{"finish_reason": None, "index": 0, "delta": delta}], "id": "c1", "model": PATH, **extra})


def _run(texts: list[bytes]) -> tuple[list[Chunk], list[str], BaseException | None]:
    """The chunks a chat stream pushed for ``texts``, the body types xllamacpp was called with, and the end error."""
    family = ModelRegistry().get("smollm2-instruct")
    engine = LlamaCppEngine(
        model_uid="uid-1",
        family=family,
        spec=family.model_specs[0],
        quantization="Q4_1",
        model_path=PATH,
        config=LlamaCppEngine.parse_config({"n_ctx": 2048}),
        hardware=detect_hardware(),
    )
    bodies: list[str] = []

    def replay(body: Any, callback: Callable[[Any], bool]) -> None:
        bodies.append(type(body).__name__)
        for text in texts:
            if callback(text if isinstance(body, bytes) else json.loads(text)):
                return

    async def scenario() -> tuple[list[Chunk], list[str], BaseException | None]:
        engine._pool = ThreadPoolExecutor(1)
        engine._server = object()  # type: ignore[assignment]  # only _executor() looks at it
        engine._load = SlotLoad(1)
        engine._speculation = SpeculationCounters()
        stream = engine._start(replay, {"messages": [{"role": "user", "content": "hi"}], "stream": True})
        got: list[Chunk] = []
        try:
            while True:
                batch, done = await stream.next_batch()
                got += batch
                if done:
                    return got, bodies, None
        except XinferenceError as exc:
            return got, bodies, exc
        finally:
            engine._pool.shutdown()

    return asyncio.run(scenario())


def test_token_chunks_pass_as_text_with_the_model_renamed() -> None:
    usage = {"completion_tokens": 2, "prompt_tokens": 3, "total_tokens": 5}
    texts = [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"content": "Hi"}),
        _chunk({"content": ' "model":"x"'}),
        _text({"choices": [], "id": "c1", "model": PATH, "usage": usage, "timings": {"predicted_n": 2}}),
    ]
    got, bodies, error = _run(texts)
    assert error is None and bodies == ["bytes"]
    first, token, quoted, last = got
    assert isinstance(first, dict) and first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert token == texts[1].replace(json.dumps(PATH).encode(), b'"uid-1"')  # the same text, model renamed
    assert isinstance(quoted, bytes) and chunk_dicts([quoted])[0]["choices"][0]["delta"]["content"] == ' "model":"x"'
    assert isinstance(last, dict) and last["usage"] == usage and "timings" not in last and last["model"] == "uid-1"
    assert all(chunk["model"] == "uid-1" for chunk in chunk_dicts(got))


def test_an_error_chunk_ends_the_stream_with_the_platform_error() -> None:
    texts = [_chunk({"role": "assistant", "content": None}), _text({"error": {"code": 400, "message": "bad"}})]
    got, _, error = _run(texts)
    assert len(got) == 1 and isinstance(error, XinferenceError)
