"""The managed engines' stream relay passes the server's chunk text on untouched but for bytes it must change.

The server is a stand-in on a loopback socket answering a chunked SSE stream as vLLM's OpenAI server writes it
(compact JSON, ``stop_reason``/``token_ids`` nulls, the model named by the uid it was launched with): vLLM's real
server is exercised in ``test_vllm.py``. Everything on the adapter's side is real (vLLM's adapter, the
:class:`ChunkStream`, the SSE reader).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.machines import linux
from tests.vision_models import VISION_CHAT_TEMPLATE, vision_family
from xinference.engines.base import Chunk, chunk_dicts
from xinference.engines.managed import engine as managed_engine
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest, XinferenceError
from xinference.model.spec import ModelFamily

CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1, gpu_name="A100", vram=40, vram_free=39)
UID = "my-model"


def _token(text: str, model: str = UID) -> bytes:
    """A token chunk as vLLM writes it."""
    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None, "stop_reason": None}
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": model, "choices": [choice]}
    return json.dumps(body, separators=(",", ":")).encode()


def _sse(payloads: list[bytes]) -> bytes:
    events = [b"data: " + payload + b"\n\n" for payload in [*payloads, b"[DONE]"]]
    body = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + body


def _engine(tmp_path: Path) -> VLLMEngine:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": VISION_CHAT_TEMPLATE}))
    family = ModelFamily.model_validate(vision_family("tiny", tmp_path))
    engine = VLLMEngine(
        model_uid=UID,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(tmp_path),
        config=VLLMEngine.parse_config({}),
        hardware=CUDA,
    )
    engine._server = object()  # type: ignore[assignment]  # only _require() looks at it
    engine._client = object()  # type: ignore[assignment]
    engine.api_key = "k"
    return engine


def _relay(tmp_path: Path, payloads: list[bytes]) -> tuple[list[Chunk], BaseException | None]:
    """Every chunk the adapter pushed for a streamed chat answered with ``payloads``, and the error it ended with."""

    async def run() -> tuple[list[Chunk], BaseException | None]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(_sse(payloads))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        engine = _engine(tmp_path)
        engine._port = server.sockets[0].getsockname()[1]
        got: list[Chunk] = []
        async with server:
            stream = await engine.chat_stream({"messages": [{"role": "user", "content": "hi"}], "stream": True})
            try:
                while True:
                    batch, done = await stream.next_batch()
                    got += batch
                    if done:
                        return got, None
            except XinferenceError as exc:
                return got, exc

    return asyncio.run(run())


class _CountingLoads:
    """Counts ``json.loads`` calls made through the managed engine module (a spy; the real function runs)."""

    def __init__(self) -> None:
        self.calls = 0
        self._loads = json.loads

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self._loads(*args, **kwargs)


def test_plain_token_chunks_pass_as_text_with_only_vendor_nulls_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _CountingLoads()
    monkeypatch.setattr(managed_engine.json, "loads", spy)
    payloads = [_token("Hel"), _token("lo"), _token(' "quoted" \\n')]
    got, error = _relay(tmp_path, payloads)
    monkeypatch.undo()
    assert error is None and spy.calls == 0  # not one parse in the relay
    assert got == [payload.replace(b',"stop_reason":null', b"") for payload in payloads]
    assert [chunk["choices"][0]["delta"]["content"] for chunk in chunk_dicts(got)] == ["Hel", "lo", ' "quoted" \\n']
    assert all("stop_reason" not in chunk["choices"][0] for chunk in chunk_dicts(got))


def test_chunks_that_need_translation_are_parsed_and_normalised(tmp_path: Path) -> None:
    reasoning = json.dumps(
        {"id": "c", "model": UID, "choices": [{"index": 0, "delta": {"reasoning": "hmm"}, "finish_reason": None}]},
        separators=(",", ":"),
    ).encode()
    stopped = json.dumps(
        {"id": "c", "model": UID, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": 7}]},
        separators=(",", ":"),
    ).encode()
    spaced = json.dumps({"id": "c", "model": UID, "choices": [], "usage": {"completion_tokens": 2}}).encode()
    got, error = _relay(tmp_path, [reasoning, _token("x", model="/path/to/weights"), stopped, spaced])
    assert error is None
    first, renamed, last, usage = got
    assert isinstance(first, dict) and first["choices"][0]["delta"] == {"reasoning_content": "hmm"}
    assert isinstance(renamed, dict) and renamed["model"] == UID
    assert isinstance(last, dict) and last["choices"][0]["stop_reason"] == 7  # a value is kept
    assert isinstance(usage, dict) and usage["usage"] == {"completion_tokens": 2}


def test_an_error_in_the_stream_becomes_the_platform_error(tmp_path: Path) -> None:
    error_event = json.dumps({"error": {"message": "bad temperature", "code": 400}}).encode()
    got, error = _relay(tmp_path, [_token("a"), error_event, _token("never")])
    assert got == [_token("a").replace(b',"stop_reason":null', b"")]
    assert isinstance(error, InvalidRequest) and "bad temperature" in str(error)
