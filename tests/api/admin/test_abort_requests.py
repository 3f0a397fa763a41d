"""``POST /v1/models/{uid}/requests/{request_id}/abort`` on this module's own server: a chat or completion sent with
``request_id`` really stops (the engine's slot is freed, generation stops), a stream ends with an error frame, a
whole response with a 409, and the id stays refused for ``block_duration`` seconds. Also through Xinference's own
client and ours (sync and async).

The module runs its own server, so that its aborts and 3,000-token requests do not decide what the session's shared
model serves next; its last test checks that the model answers a greedy question after the aborts exactly as it did
right after launch. (An earlier suspicion, that aborts left the shared model answering "capital of France" with
French nonsense, came from the question itself: SmolLM2-135M answers the bare question that way greedily, raw
llama.cpp included, from a fresh start.)"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from xinference_client import RESTfulClient as OfficialClient

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from xinference.client import AsyncClient, Client, ClientError

#: A greedy question; its answer right after launch is what the model must still answer after every abort.
QUESTION = {
    "model": DEFAULT_MODEL,
    "messages": [
        {"role": "system", "content": "You are a geography assistant. Answer in one short sentence."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "max_tokens": 24,
    "temperature": 0,
}
FRESH_ANSWER: dict[str, str] = {}

LONG = {
    "model": DEFAULT_MODEL,
    "messages": [{"role": "user", "content": "Tell a very long story about a dragon."}],
    "max_tokens": 3000,
    "ignore_eos": True,
}


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """This module's own server with the default chat model (see the module docstring for why not the shared one)."""
    server = start_local_server(tmp_path_factory.mktemp("abort-home"))
    try:
        response = httpx.post(
            f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}, timeout=120
        )
        assert response.status_code == 200, response.text
        FRESH_ANSWER["text"] = _answer(server)
        yield server
    finally:
        server.stop_and_reap()


def _answer(server: LocalServer) -> str:
    response = httpx.post(f"{server.api}/chat/completions", json=QUESTION, timeout=60)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def _engine(server: LocalServer, name: str) -> float:
    page = httpx.get(f"{server.endpoint}/metrics", timeout=10).text
    return sum(
        s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
        if s.name == name and s.labels.get("model_name") == DEFAULT_MODEL
    )


def _abort(server: LocalServer, request_id: str, **body: Any) -> httpx.Response:
    url = f"{server.api}/models/{DEFAULT_MODEL}/requests/{request_id}/abort"
    return httpx.post(url, json=body or None, timeout=10)


def _assert_engine_stopped(server: LocalServer) -> None:
    """No slot busy, and the engine's count of generated tokens settles at once (the aborted request asked for
    3,000, which the tiny model would take many seconds to write) and stays put."""
    deadline = time.monotonic() + 5
    while _engine(server, "xinference:engine_slots_busy") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _engine(server, "xinference:engine_slots_busy") == 0
    last = _engine(server, "xinference:engine_generation_tokens")
    while True:  # the engine reports a slot's tokens when it releases the slot: wait for that report
        time.sleep(0.3)
        now = _engine(server, "xinference:engine_generation_tokens")
        if now == last:
            break
        assert time.monotonic() < deadline, "the engine kept generating after the abort"
        last = now
    time.sleep(0.5)
    assert _engine(server, "xinference:engine_generation_tokens") == last


def _wait_busy(server: LocalServer) -> None:
    """Until the engine runs a request (the one a thread just sent has reached it)."""
    deadline = time.monotonic() + 20
    while not _engine(server, "xinference:engine_slots_busy"):
        assert time.monotonic() < deadline, "the request never reached the engine"
        time.sleep(0.02)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = work()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def test_abort_a_stream(local_server: LocalServer) -> None:
    started = _engine(local_server, "xinference:engine_generation_tokens")
    frames: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{local_server.api}/chat/completions", json={**LONG, "stream": True, "request_id": "s1"}, timeout=60
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            frames.append(json.loads(line[6:]))
            if len(frames) == 3:
                assert _abort(local_server, "s1").json() == {"msg": "DONE"}
    assert "error" in frames[-1] and all("error" not in f for f in frames[:-1])
    assert frames[-1]["error"]["code"] == "request_aborted" and "'s1'" in frames[-1]["error"]["message"]
    _assert_engine_stopped(local_server)
    assert _engine(local_server, "xinference:engine_generation_tokens") - started < 1000


def test_abort_a_whole_response(local_server: LocalServer) -> None:
    url = f"{local_server.api}/chat/completions"
    thread, result = _in_thread(lambda: httpx.post(url, json={**LONG, "request_id": "w1"}, timeout=60))
    _wait_busy(local_server)
    assert _abort(local_server, "w1", block_duration=0).json() == {"msg": "DONE"}
    thread.join(30)
    response = result["value"]
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "request_aborted"
    _assert_engine_stopped(local_server)
    # block_duration=0: the id may be used again at once
    again = httpx.post(url, json={**LONG, "max_tokens": 2, "request_id": "w1"}, timeout=60)
    assert again.status_code == 200


def test_an_id_aborted_before_its_request_is_refused_for_block_duration(local_server: LocalServer) -> None:
    assert _abort(local_server, "early", block_duration=1).json() == {"msg": "NOT_FOUND"}
    body = {**LONG, "max_tokens": 2, "request_id": "early"}
    refused = httpx.post(f"{local_server.api}/chat/completions", json=body, timeout=60)
    assert refused.status_code == 409 and refused.json()["error"]["param"] == "request_id"
    streamed = httpx.post(f"{local_server.api}/completions", json={**body, "prompt": "x", "stream": True}, timeout=60)
    assert streamed.status_code == 409  # refused before the stream starts
    time.sleep(1.1)
    assert httpx.post(f"{local_server.api}/chat/completions", json=body, timeout=60).status_code == 200


def test_bad_input(local_server: LocalServer) -> None:
    unknown = httpx.post(f"{local_server.api}/models/no-such-model/requests/x/abort", timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    for body in ({"block_duration": -1}, {"block_duration": "30"}, {"block_duration": 10**6}, {"block": 3}):
        response = _abort(local_server, "x", **body)
        assert response.status_code == 400, body
    too_long = httpx.post(f"{local_server.api}/chat/completions", json={**LONG, "request_id": "x" * 300}, timeout=10)
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "request_id"


def test_an_id_in_use_by_a_running_request_is_refused(local_server: LocalServer) -> None:
    url = f"{local_server.api}/chat/completions"
    thread, result = _in_thread(lambda: httpx.post(url, json={**LONG, "request_id": "dup"}, timeout=60))
    try:
        _wait_busy(local_server)
        second = httpx.post(url, json={**LONG, "max_tokens": 2, "request_id": "dup"}, timeout=60)
        assert second.status_code == 400 and "already used" in second.json()["error"]["message"]
    finally:
        _abort(local_server, "dup", block_duration=0)
        thread.join(30)
    assert result["value"].status_code == 409


def test_official_client_and_ours_abort(local_server: LocalServer) -> None:
    official = OfficialClient(local_server.endpoint)
    handle = official.get_model(DEFAULT_MODEL)
    thread, result = _in_thread(
        lambda: handle.chat(
            LONG["messages"], generate_config={"max_tokens": 3000, "ignore_eos": True, "request_id": "o1"}
        )
    )
    _wait_busy(local_server)
    assert official.abort_request(DEFAULT_MODEL, "o1", block_duration=0) == {"msg": "DONE"}
    thread.join(30)
    assert isinstance(result["error"], RuntimeError) and "aborted" in str(result["error"])

    with Client(local_server.endpoint) as client:
        stream = client.get_model(DEFAULT_MODEL).chat(  # type: ignore[attr-defined]
            LONG["messages"],
            generate_config={"max_tokens": 3000, "ignore_eos": True, "stream": True, "request_id": "c1"},
        )
        next(stream)
        assert client.abort_request(DEFAULT_MODEL, "c1", block_duration=0) == {"msg": "DONE"}
        with pytest.raises(ClientError, match="aborted"):
            list(stream)

    async def asynchronous() -> None:
        async with AsyncClient(local_server.endpoint) as client:
            model = await client.get_model(DEFAULT_MODEL)
            config = {"max_tokens": 3000, "ignore_eos": True, "stream": True, "request_id": "a1"}
            stream = await model.chat(LONG["messages"], generate_config=config)  # type: ignore[attr-defined]
            await stream.__anext__()
            assert await client.abort_request(DEFAULT_MODEL, "a1", block_duration=0) == {"msg": "DONE"}
            with pytest.raises(ClientError, match="aborted"):
                async for _ in stream:
                    pass
            assert await client.abort_request(DEFAULT_MODEL, "a1") == {"msg": "NOT_FOUND"}

    asyncio.run(asynchronous())
    _assert_engine_stopped(local_server)


def test_the_model_answers_as_before_the_aborts(local_server: LocalServer) -> None:
    """After every abort above (streams, whole responses, refused ids), a greedy question gets the answer it got
    right after launch, from every slot: an abort leaves no slot or cache state behind that later requests read."""
    assert "Paris" in FRESH_ANSWER["text"]
    for _ in range(6):  # more than the slots: every slot answers once more
        assert _answer(local_server) == FRESH_ANSWER["text"]
