"""Tests of the serving-benchmark statistics and its HTTP/SSE client code.

The network tests run against a real throw-away HTTP server on 127.0.0.1 that
streams canned OpenAI-shaped SSE chunks, so request building, SSE parsing,
timing and error accounting are exercised end to end without a model.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from benchmark.bench_serving import (
    arrival_offsets,
    build_prompts,
    main,
    parse_sse_line,
    run_benchmark,
)
from benchmark.stats import RequestResult, format_table, percentile, summarize, tpot

CHUNK_GAP = 0.02
CONTENT_PIECES = ("Hello", " there", " friend")
USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}


# --------------------------------------------------------------------------
# statistics


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0, 1.0), (25, 1.75), (50, 2.5), (90, 3.7), (99, 3.97), (100, 4.0)],
)
def test_percentile_interpolates_linearly(p: float, expected: float) -> None:
    # sorted [1, 2, 3, 4]: rank = 3 * p / 100, e.g. p90 -> 2.7 -> 3 + 0.7 * 1
    assert percentile([4.0, 1.0, 3.0, 2.0], p) == pytest.approx(expected)


def test_percentile_single_value_and_errors() -> None:
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def _ok(ttft: float, e2e: float, tokens: int, itl: list[float] | None = None) -> RequestResult:
    return RequestResult(
        ok=True,
        ttft=ttft,
        e2e=e2e,
        itl=itl or [],
        prompt_tokens=10,
        completion_tokens=tokens,
    )


def test_tpot_excludes_first_token_and_single_token_requests() -> None:
    # (1.0 s - 0.1 s) spread over the 9 tokens after the first one
    assert tpot(_ok(0.1, 1.0, 10)) == pytest.approx(0.1)
    assert tpot(_ok(0.1, 0.1, 1)) is None
    assert tpot(RequestResult(ok=False, ttft=0.1, e2e=1.0, completion_tokens=10)) is None


def test_summarize_latencies_throughput_and_errors() -> None:
    results = [
        _ok(0.1, 1.0, 10, itl=[0.1, 0.2]),  # tpot 0.1
        _ok(0.3, 2.1, 4, itl=[0.3]),  # tpot 0.6
        _ok(0.2, 0.2, 1),  # no tpot
        RequestResult(error="HTTP 500: boom"),
        RequestResult(error="HTTP 500: boom"),
        RequestResult(error="ReadTimeout: "),
    ]
    summary = summarize(results, wall_seconds=2.0)

    assert summary["completed"] == 3
    assert summary["errors"] == 3
    assert summary["error_samples"] == ["HTTP 500: boom", "ReadTimeout: "]
    assert summary["total_output_tokens"] == 15
    assert summary["total_prompt_tokens"] == 30
    assert summary["request_throughput"] == pytest.approx(1.5)
    assert summary["output_throughput"] == pytest.approx(7.5)
    assert summary["ttft_ms_mean"] == pytest.approx(200.0)
    assert summary["ttft_ms_p50"] == pytest.approx(200.0)
    assert summary["ttft_ms_p90"] == pytest.approx(280.0)  # 0.2 + 0.8 * 0.1
    assert summary["tpot_ms_mean"] == pytest.approx(350.0)
    assert summary["tpot_ms_p50"] == pytest.approx(350.0)
    assert summary["tpot_ms_p99"] == pytest.approx(595.0)  # 0.1 + 0.99 * 0.5
    assert summary["itl_ms_mean"] == pytest.approx(200.0)
    assert summary["itl_ms_p90"] == pytest.approx(280.0)
    assert summary["e2e_ms_p50"] == pytest.approx(1000.0)
    assert summary["e2e_ms_p99"] == pytest.approx(2078.0)  # 1.0 + 0.98 * 1.1


def test_summarize_empty_input_is_all_undefined() -> None:
    summary = summarize([], wall_seconds=0.0)
    assert summary["completed"] == summary["errors"] == 0
    assert summary["request_throughput"] is None
    assert summary["output_throughput"] is None
    assert summary["ttft_ms_p50"] is None
    assert summary["tpot_ms_mean"] is None
    json.dumps(summary, allow_nan=False)  # stays valid JSON
    assert "TTFT" in format_table(summary)


def test_format_table_shows_numbers_and_errors() -> None:
    results = [_ok(0.1, 1.0, 10), RequestResult(error="HTTP 500: boom")]
    table = format_table(summarize(results, wall_seconds=1.0))
    assert "Output throughput (tok/s):    10.00" in table
    assert "error: HTTP 500: boom" in table


# --------------------------------------------------------------------------
# prompt set, arrivals, SSE lines


def test_prompts_are_deterministic_per_seed() -> None:
    assert build_prompts(20, seed=3) == build_prompts(20, seed=3)
    assert build_prompts(20, seed=3) != build_prompts(20, seed=4)
    assert len(build_prompts(0, seed=0)) == 0


def test_arrival_offsets() -> None:
    assert arrival_offsets(3, math.inf, seed=0) == [0.0, 0.0, 0.0]
    poisson = arrival_offsets(200, 50.0, seed=1)
    assert poisson == arrival_offsets(200, 50.0, seed=1)
    assert poisson[0] == 0.0 and poisson == sorted(poisson)
    mean_gap = poisson[-1] / (len(poisson) - 1)
    assert 0.01 < mean_gap < 0.03  # about 1 / 50 s
    with pytest.raises(ValueError):
        arrival_offsets(3, 0.0, seed=0)


def test_parse_sse_line() -> None:
    assert parse_sse_line('data: {"a": 1}') == '{"a": 1}'
    assert parse_sse_line("data:[DONE]") == "[DONE]"
    assert parse_sse_line("") is None
    assert parse_sse_line(": keep-alive") is None
    assert parse_sse_line("event: message") is None


# --------------------------------------------------------------------------
# a real local OpenAI-shaped streaming server


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _text_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
    }


def _stream_events(mode: str, endpoint: str) -> list[dict[str, Any]]:
    """Chunks for one response: paced content, finish, then usage.

    ``midstream-error`` stops right after an error event, as a crashing
    server would, so nothing is written after the client hangs up.
    """
    if endpoint == "chat":
        events = [_chat_chunk({"role": "assistant"})]
        events += [_chat_chunk({"content": piece}) for piece in CONTENT_PIECES]
        events.append(_chat_chunk({}, finish="stop"))
    else:
        events = [_text_chunk(piece) for piece in CONTENT_PIECES]
        events.append(_text_chunk("", finish="stop"))
    if mode == "midstream-error":
        return [*events[:2], {"error": {"message": "engine crashed"}}]
    if mode != "nousage":
        events.append({"choices": [], "usage": USAGE})
    return events


class _FakeOpenAI(BaseHTTPRequestHandler):
    """``/<mode>/v1/...``: mode ``ok``, ``nousage``, ``midstream-error``, ``fail``.

    A request counts as in flight until just before its final write, so the
    client cannot start its next request while the old one is still counted.
    """

    requests: ClassVar[list[tuple[dict[str, Any], str | None]]] = []
    in_flight: ClassVar[int] = 0
    max_in_flight: ClassVar[int] = 0
    lock: ClassVar[threading.Lock] = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging on stderr."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._enter(body)
        mode = self.path.split("/")[1]
        if mode == "fail":
            self._send_failure()
        else:
            self._send_stream(mode, self.path.endswith("/chat/completions"))

    def _enter(self, body: dict[str, Any]) -> None:
        cls = type(self)
        with cls.lock:
            cls.requests.append((body, self.headers.get("Authorization")))
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)

    def _leave(self) -> None:
        with type(self).lock:
            type(self).in_flight -= 1

    def _send_failure(self) -> None:
        payload = b'{"error": {"message": "model not loaded"}}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self._leave()
        self.wfile.write(payload)

    def _send_stream(self, mode: str, chat: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        events = [
            f"data: {json.dumps(event)}\n\n".encode()
            for event in _stream_events(mode, "chat" if chat else "completions")
        ]
        if mode != "midstream-error":
            events.append(b"data: [DONE]\n\n")
        for index, event in enumerate(events):
            time.sleep(CHUNK_GAP)
            if index == len(events) - 1:
                self._leave()
            self.wfile.write(event)
            self.wfile.flush()


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _reset_server_state() -> None:
    _FakeOpenAI.requests = []
    _FakeOpenAI.in_flight = _FakeOpenAI.max_in_flight = 0


def _run(url: str, mode: str, **kwargs: Any) -> tuple[list[RequestResult], float]:
    options: dict[str, Any] = {
        "model": "tiny",
        "endpoint": "chat",
        "prompts": ["hi"],
        "concurrency": 1,
        "max_tokens": 8,
    } | kwargs
    return asyncio.run(run_benchmark(f"{url}/{mode}/v1", **options))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_stream_timings_and_usage_tokens(server_url: str, endpoint: str) -> None:
    results, wall = _run(server_url, "ok", endpoint=endpoint, ignore_eos=True, api_key="secret")
    (result,) = results
    assert result.ok and result.error == ""
    # tokens come from the usage chunk (5), not from the 3 content chunks
    assert (result.prompt_tokens, result.completion_tokens) == (7, 5)
    assert not result.usage_from_chunks
    assert len(result.itl) == len(CONTENT_PIECES) - 1
    # the server sleeps CHUNK_GAP before every event, so the last content piece arrives no sooner than that many gaps
    # in; a busy reader can only see events later (and two at once, so one gap alone proves nothing)
    assert result.ttft is not None and result.ttft >= CHUNK_GAP * 0.8
    assert result.ttft + sum(result.itl) >= CHUNK_GAP * 0.8 * len(CONTENT_PIECES)
    assert result.ttft + sum(result.itl) <= result.e2e <= wall

    body, auth = _FakeOpenAI.requests[0]
    assert auth == "Bearer secret"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0
    assert body["max_tokens"] == 8
    assert body["ignore_eos"] is True
    if endpoint == "chat":
        assert body["messages"] == [{"role": "user", "content": "hi"}]
    else:
        assert body["prompt"] == "hi"


def test_missing_usage_falls_back_to_chunk_count(server_url: str) -> None:
    (result,), _ = _run(server_url, "nousage")
    assert result.ok
    assert result.usage_from_chunks
    assert result.completion_tokens == len(CONTENT_PIECES)
    body, auth = _FakeOpenAI.requests[0]
    assert auth is None and "ignore_eos" not in body
    assert summarize([result], 1.0)["usage_from_chunks"] == 1


def test_http_and_stream_errors_are_counted_not_raised(server_url: str) -> None:
    failed, _ = _run(server_url, "fail", prompts=["a", "b"])
    assert [r.ok for r in failed] == [False, False]
    assert failed[0].error.startswith("HTTP 500: ")
    assert "model not loaded" in failed[0].error

    (broken,), _ = _run(server_url, "midstream-error")
    assert not broken.ok and "engine crashed" in broken.error

    summary = summarize(failed + [broken], 1.0)
    assert summary["errors"] == 3 and summary["completed"] == 0


def _unused_port() -> int:
    """A port that was free a moment ago, so connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_is_counted() -> None:
    (result,), _ = _run(f"http://127.0.0.1:{_unused_port()}", "ok")
    assert not result.ok and result.error.startswith("ConnectError")


def test_concurrency_limits_requests_in_flight(server_url: str) -> None:
    results, _ = _run(server_url, "ok", prompts=["p"] * 6, concurrency=2)
    assert all(r.ok for r in results)
    assert _FakeOpenAI.max_in_flight == 2


def test_cli_sweep_writes_json(server_url: str, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--base-url", f"{server_url}/ok/v1",
        "--model", "tiny",
        "--num-prompts", "3",
        "--concurrency", "1,3",
        "--warmup", "1",
        "--json-out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    assert len(_FakeOpenAI.requests) == 1 + 3 + 3  # warm-up excluded from stats
    runs = json.loads(out.read_text())["runs"]
    assert [run["settings"]["concurrency"] for run in runs] == [1, 3]
    assert all(run["summary"]["completed"] == 3 for run in runs)
    assert runs[0]["summary"]["total_output_tokens"] == 3 * USAGE["completion_tokens"]
    assert runs[0]["settings"]["request_rate"] is None
    assert "=== concurrency=3 ===" in capsys.readouterr().out


def test_cli_exits_non_zero_when_everything_fails(server_url: str) -> None:
    argv = ["--base-url", f"{server_url}/fail/v1", "--model", "tiny", "--warmup", "0"]
    assert main([*argv, "--num-prompts", "2"]) == 1


def test_delivery_gaps_leave_out_chunks_that_arrived_together() -> None:
    # a server that coalesces: pairs of chunks 40 ms apart, the second of each pair right behind the first
    coalesced = _ok(0.1, 1.0, 7, itl=[0.0001, 0.040, 0.0001, 0.040, 0.0001, 0.040])
    summary = summarize([coalesced], 1.0)
    assert summary["itl_ms_p50"] < 30  # the per-chunk ITL hides the rhythm
    assert summary["gap_ms_p50"] == pytest.approx(40.0)
    assert summary["gap_ms_p99"] == pytest.approx(40.0)
