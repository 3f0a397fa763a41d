"""Streams served by llama.cpp pass token chunks as JSON text from the model process to the client (see
``engines.base.Chunk``): on the wire every chunk still names the model uid, the role chunk has ``""`` content,
``timings`` never leaks, usage comes only when asked for and is recorded in ``/metrics`` either way, and text
completions stream the same way."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx


def _stream(endpoint: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    with httpx.Client(timeout=120) as client:
        with client.stream("POST", f"{endpoint}{path}", json=body) as resp:
            assert resp.status_code == 200
            lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        assert line.startswith("data: {")
        chunks.append(json.loads(line[6:]))
    return chunks


def _generated(endpoint: str, model_uid: str) -> float:
    text = httpx.get(f"{endpoint}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("xinference:generation_tokens_total{") and f'model_name="{model_uid}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_chat_stream_chunks_are_whole_and_usage_follows_the_request(endpoint: str, model_uid: str) -> None:
    # ignore_eos: the counts below hold only if both streams run to max_tokens (sampled text may end after 5)
    body = {
        "model": model_uid,
        "messages": [{"role": "user", "content": "Count to ten"}],
        "max_tokens": 6,
        "ignore_eos": True,
    }
    before = _generated(endpoint, model_uid)
    plain = _stream(endpoint, "/v1/chat/completions", {**body, "stream": True})
    # recorded although the client did not ask for usage; the last batch is counted as the stream closes, which
    # may be just after the client read [DONE]
    deadline = time.monotonic() + 5
    while _generated(endpoint, model_uid) - before < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _generated(endpoint, model_uid) - before == 6
    assert all(chunk["model"] == model_uid and "timings" not in chunk and "usage" not in chunk for chunk in plain)
    assert plain[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sum(1 for chunk in plain if chunk["choices"] and chunk["choices"][0]["delta"].get("content")) >= 1
    with_usage = _stream(
        endpoint, "/v1/chat/completions", {**body, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert with_usage[-1]["usage"]["completion_tokens"] == 6 and with_usage[-1]["model"] == model_uid
    assert len({chunk["id"] for chunk in with_usage}) == 1


def test_completions_stream_chunks_name_the_uid(endpoint: str, model_uid: str) -> None:
    body = {"model": model_uid, "prompt": "Once upon a time", "max_tokens": 5, "stream": True}
    chunks = _stream(endpoint, "/v1/completions", body)
    assert all(chunk["model"] == model_uid and "timings" not in chunk for chunk in chunks)
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks if chunk["choices"])
