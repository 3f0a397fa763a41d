"""Streaming under concurrency, and a client that disconnects mid-stream frees its engine slot."""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import pytest

LONG = {
    "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
    "max_tokens": 3000,
    "ignore_eos": True,
    "stream": True,
}


def _read_some(endpoint: str, model_uid: str, chunks: int) -> list[dict]:
    """Open a long stream, read a few chunks, then drop the connection."""
    seen: list[dict] = []
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{endpoint}/v1/chat/completions", json={"model": model_uid, **LONG}) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    seen.append(json.loads(line[6:]))
                if len(seen) >= chunks:
                    break
    return seen


def _seconds(call) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


@pytest.mark.heavy  # four 3000-token streams
def test_disconnect_frees_all_slots(endpoint: str, model_uid: str) -> None:
    # Fill every slot (4 by default on CPU) with 3000-token requests, then walk away from all of them. If the
    # engine kept generating, the next request would queue behind ~3000 decoding steps. The bound is in decoding
    # steps measured on this machine just before, not in seconds, so a busy machine cannot fail it.
    def calibrate() -> None:
        reply = httpx.post(
            f"{endpoint}/v1/chat/completions",
            timeout=600,
            json={
                "model": model_uid,
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 32,
                "ignore_eos": True,
            },
        )
        assert reply.json()["usage"]["completion_tokens"] == 32

    step = _seconds(calibrate) / 32  # one decoding step, prompt included: an overestimate
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _read_some(endpoint, model_uid, 3), range(4)))
    assert all(len(r) == 3 for r in results)
    response: list[httpx.Response] = []
    elapsed = _seconds(
        lambda: response.append(
            httpx.post(
                f"{endpoint}/v1/chat/completions",
                timeout=600,
                json={"model": model_uid, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
            )
        )
    )
    assert response[0].status_code == 200
    assert elapsed < 300 * step, (
        f"a fresh request waited {elapsed:.1f}s ({elapsed / step:.0f} decoding steps): "
        "the abandoned streams still hold the slots"
    )


def test_concurrent_streams_are_complete_and_independent(endpoint: str, model_uid: str) -> None:
    prompts = ["Count from 1 to 5.", "Name three colors.", "What is 2+2?", "Say hello in French."]

    def run(prompt: str) -> tuple[str, dict, set[str], list[str]]:
        text, usage, ids, finishes = "", {}, set(), []
        body = {
            "model": model_uid,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 12,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with httpx.stream("POST", f"{endpoint}/v1/chat/completions", json=body, timeout=120) as resp:
            lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        for line in lines[:-1]:
            chunk = json.loads(line[6:])
            ids.add(chunk["id"])
            if chunk["choices"]:
                text += chunk["choices"][0]["delta"].get("content") or ""
                if chunk["choices"][0]["finish_reason"]:
                    finishes.append(chunk["choices"][0]["finish_reason"])
            usage = chunk.get("usage") or usage
        return text, usage, ids, finishes

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, prompts))
    for text, usage, ids, finishes in results:
        assert text and 0 < usage["completion_tokens"] <= 12
        assert len(ids) == 1  # every chunk of a stream belongs to that stream
        assert len(finishes) == 1 and finishes[0] in ("stop", "length")
    # Four different prompts, four different answers: no stream received another one's tokens. (Greedy text is
    # not compared with a sequential run: llama.cpp's batched kernels may round differently.)
    assert len({text for text, *_ in results}) == 4


def test_the_role_chunk_carries_empty_content_not_null(endpoint: str, model_uid: str) -> None:
    # OpenAI and Xinference open a chat stream with {"role": "assistant", "content": ""}; clients that concatenate
    # every delta's content (LlamaIndex, older Dify) break on null, which llama.cpp's own server sends
    body = {"model": model_uid, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
    first = _first_chunk(endpoint, body)
    delta = first["choices"][0]["delta"]
    assert delta["role"] == "assistant" and delta["content"] == ""


def _first_chunk(endpoint: str, body: dict) -> dict:
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{endpoint}/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    chunk: dict = json.loads(line[6:])
                    return chunk
    raise AssertionError("the stream sent no chunk")
