"""Platform CPU per streamed token of the relay alone: the model process's share (the managed engines' SSE reader
and normaliser, or llama.cpp's token callback, the ChunkStream, the pickling of a ``pull_many`` answer) and the API
process's (unpickling, ``observe_batch``, SSE framing), without an engine's own compute.

Why a separate measurement: on a shared 2-core host the engine's decode dwarfs and disturbs these costs, so an
end-to-end A/B cannot resolve tenths of a millisecond per token in a short run (``compare_engine.py`` measures the
same costs end to end on a quiet machine). Here the engine's output is replayed (the token chunks exactly as vLLM's
server and xllamacpp write them), through the real adapter code, and CPU time is read with ``time.process_time``
(a stand-in server runs in a child process, so its CPU is not counted).

Run it against a tree to measure it: ``PYTHONPATH=<tree> python benchmark/relay_cost.py``; the script imports only
``xinference``, so the same file measures ``main`` (before) and a branch (after)::

    PYTHONPATH=/work/main python benchmark/relay_cost.py --json-out before.json
    PYTHONPATH=$PWD python benchmark/relay_cost.py --json-out after.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

UID = "bench-relay"
STREAMS_PER_LEVEL = {1: 1, 4: 4}

_SERVER = r"""
import asyncio, sys
head, *parts = open(sys.argv[1], "rb").read().split(b"\0")
pace = float(sys.argv[2])
async def handle(reader, writer):
    await reader.readuntil(b"\r\n\r\n")
    writer.write(head)
    for part in parts:  # one event per write, paced as a decoding engine sends tokens
        writer.write(part)
        await writer.drain()
        if pace:
            await asyncio.sleep(pace)
    writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"""


def vllm_events(tokens: int) -> list[bytes]:
    """A streamed chat answer as vLLM's OpenAI server writes it (compact JSON, its null vendor fields)."""
    events = []
    for i in range(tokens):
        delta = {"role": "assistant", "content": ""} if i == 0 else {"content": f" tok{i}"}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, "stop_reason": None}
        chunk = {
            "id": "chatcmpl-b1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": UID,
            "choices": [choice],
        }
        events.append(json.dumps(chunk, separators=(",", ":")).encode())
    usage = {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens}
    last = {"id": "chatcmpl-b1", "object": "chat.completion.chunk", "created": 1, "model": UID, "choices": []}
    events.append(json.dumps({**last, "usage": usage}, separators=(",", ":")).encode())
    return events


def llama_texts(tokens: int, model_path: str) -> list[bytes]:
    """A streamed chat answer as xllamacpp hands it over (the model named by its file, timings on the last)."""

    def text(chunk: dict[str, Any]) -> bytes:
        return json.dumps(chunk, separators=(",", ":")).encode()

    tail = {"created": 1, "id": "chatcmpl-b1", "model": model_path, "system_fingerprint": "b0-unknown"}
    tail["object"] = "chat.completion.chunk"
    texts = []
    for i in range(tokens):
        delta = {"role": "assistant", "content": None} if i == 0 else {"content": f" tok{i}"}
        texts.append(text({"choices": [{"finish_reason": None, "index": 0, "delta": delta}], **tail}))
    usage = {"completion_tokens": tokens, "prompt_tokens": 20, "total_tokens": tokens + 20}
    texts.append(text({"choices": [], **tail, "usage": usage, "timings": {"prompt_n": 20, "predicted_n": tokens}}))
    return texts


def _api_side(batches: list[list[Any]]) -> float:
    """CPU seconds the API process spends on these ``pull_many`` batches: unpickle, observe, frame."""
    from xinference.api.gateway.admission import Gate, Ticket
    from xinference.api.metrics import observe_batch
    from xinference.api.sse import encode_frames

    class _Sink:
        def finished(self, ticket: Any) -> None:
            pass

        def rejected(self, *args: Any) -> None:
            pass

    ticket = Ticket(Gate(UID, "bench", capacity=1, max_queued=1, queue_timeout=1, sink=_Sink()), "/v1/chat", 0.0)
    messages = [pickle.dumps({"s1": (batch, False, None)}, protocol=5) for batch in batches]
    start = time.process_time()
    for message in messages:
        batch, _, _ = pickle.loads(message)["s1"]
        encode_frames(observe_batch(ticket, batch, False))
    return time.process_time() - start


def _rounds(chunks: list[Any], per_round: int) -> list[list[Any]]:
    return [chunks[i : i + per_round] for i in range(0, len(chunks), per_round)]


def _pickling(batches: list[list[Any]]) -> float:
    start = time.process_time()
    for batch in batches:
        pickle.dumps({"s1": (batch, False, None)}, protocol=5)
    return time.process_time() - start


async def _managed_model_side(
    streams: int, tokens: int, workdir: Path, pace_ms: float
) -> tuple[float, list[list[Any]]]:
    """CPU seconds of vLLM's adapter relaying ``streams`` concurrent answers, each event sent on its own every
    ``pace_ms`` (so every token costs a socket read and a loop wake-up, as with a real server), and their chunks."""
    from xinference.engines.vllm.engine import VLLMEngine
    from xinference.hardware import detect_hardware
    from xinference.model.registry import ModelRegistry

    family = ModelRegistry().get("smollm2-instruct")  # any chat family: only the request translation reads it
    engine = VLLMEngine(
        model_uid=UID,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(workdir),
        config=VLLMEngine.parse_config({}),
        hardware=detect_hardware(),
    )
    events = [b"data: " + event + b"\n\n" for event in [*vllm_events(tokens), b"[DONE]"]]
    parts = [b"%x\r\n%s\r\n" % (len(event), event) for event in events] + [b"0\r\n\r\n"]
    answer = workdir / "answer.http"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer.write_bytes(b"\0".join([head, *parts]))
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(answer), str(pace_ms / 1000)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        engine._port = int(server.stdout.readline())
        engine._server = object()  # type: ignore[assignment]  # only _require() looks at these
        engine._client = object()  # type: ignore[assignment]
        engine.api_key = "k"

        async def one() -> list[Any]:
            stream = await engine.chat_stream({"messages": [{"role": "user", "content": "hi"}], "stream": True})
            got: list[Any] = []
            while True:
                batch, done = await stream.next_batch()
                got += batch
                if done:
                    return got

        await one()  # warm: imports, first connection
        start = time.process_time()
        results = await asyncio.gather(*(one() for _ in range(streams)))
        return time.process_time() - start, results
    finally:
        server.kill()
        server.wait()


def _llama_model_side(streams: int, tokens: int) -> tuple[float, list[list[Any]]]:
    """CPU seconds of llama.cpp's adapter handing ``streams`` replayed answers to ChunkStreams (its callback as
    xllamacpp calls it: bytes when given a bytes body, else the dict its orjson/json decode builds)."""
    from xinference.engines.llama_cpp.engine import LlamaCppEngine
    from xinference.engines.llama_cpp.slots import SlotLoad
    from xinference.engines.llama_cpp.speculative import SpeculationCounters
    from xinference.hardware import detect_hardware
    from xinference.model.registry import ModelRegistry

    try:
        import orjson

        decode: Callable[[bytes], Any] = orjson.loads
    except ImportError:  # xllamacpp falls back to json as well
        decode = json.loads
    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    path = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    engine = LlamaCppEngine(
        model_uid=UID,
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=path,
        config=LlamaCppEngine.parse_config({"n_ctx": 2048}),
        hardware=detect_hardware(),
    )
    texts = llama_texts(tokens, path)

    def replay(body: Any, callback: Callable[[Any], bool]) -> None:
        raw = isinstance(body, (bytes, str))
        for text in texts:
            if callback(text if raw else decode(text)):
                return

    async def run() -> tuple[float, list[list[Any]]]:
        engine._pool = ThreadPoolExecutor(max(1, streams))
        engine._server = object()
        engine._load = SlotLoad(max(1, streams))
        engine._speculation = SpeculationCounters()
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}

        async def one() -> list[Any]:
            stream = engine._start(replay, dict(body))
            got: list[Any] = []
            while True:
                batch, done = await stream.next_batch()
                got += batch
                if done:
                    return got

        await one()
        start = time.process_time()
        results = await asyncio.gather(*(one() for _ in range(streams)))
        spent = time.process_time() - start
        engine._pool.shutdown()
        return spent, results

    return asyncio.run(run())


def measure(engine: str, streams: int, tokens: int, per_round: int, pace_ms: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        if engine == "vllm":
            model_cpu, results = asyncio.run(_managed_model_side(streams, tokens, Path(tmp), pace_ms))
        else:
            model_cpu, results = _llama_model_side(streams, tokens)
    rounds = [batch for chunks in results for batch in _rounds(chunks, per_round)]
    model_cpu += _pickling(rounds)
    api_cpu = _api_side(rounds)
    produced = streams * tokens
    kinds = {type(chunk).__name__ for chunks in results for chunk in chunks}
    return {
        "engine": engine,
        "concurrency": streams,
        "tokens": produced,
        "chunks_per_round": per_round,
        "chunk_types": sorted(kinds),
        "model_ms_per_token": 1000 * model_cpu / produced,
        "api_ms_per_token": 1000 * api_cpu / produced,
        "platform_ms_per_token": 1000 * (model_cpu + api_cpu) / produced,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per stream")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--per-round", type=int, default=1, help="chunks per pull_many round (1: per token)")
    parser.add_argument("--engines", default="llama.cpp,vllm")
    parser.add_argument("--pace-ms", type=float, default=2.0, help="the stand-in vLLM server's gap between events")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    import xinference

    print(f"xinference from {Path(xinference.__file__).parent}")
    rows = []
    for engine in args.engines.split(","):
        for level in (int(c) for c in args.concurrency.split(",")):
            row = measure(engine, level, args.tokens, args.per_round, args.pace_ms)
            rows.append(row)
            print(
                f"{engine:9s} c={level}  platform {row['platform_ms_per_token']:.3f} ms/token "
                f"(model process {row['model_ms_per_token']:.3f}, API {row['api_ms_per_token']:.3f}); "
                f"chunks as {'/'.join(row['chunk_types'])}",
                flush=True,
            )
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
