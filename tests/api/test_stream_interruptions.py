"""Streams the platform ends, on a real server with the bundled SmolLM2 model (llama.cpp): every one ends with an
error event naming why, in the API's own dialect, never with a plain end that passes half an answer off as whole.

- unload mid-stream (chat completions, Anthropic Messages, OpenAI Responses), and a whole response cut by it;
- a replica removed (scale-down) mid-stream, while the other replica's stream goes on;
- a model process frozen by SIGSTOP (a host lost without a connection reset): the stream ends within
  ``XINFERENCE_STREAM_PULL_TIMEOUT`` and its admission slot is free at once, then SIGCONT and it serves again;
- the API process frozen longer than ``XINFERENCE_STALE_STREAM_SECONDS``: the model process ends the unread stream
  and the API, once it runs again, passes the reason on.

The unload and scale-down reasons are the supervisor's, which the worker passes to the model process
(``ModelActor.stop_serving``) before it removes it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server

pytestmark = pytest.mark.slow

UID = "cut"
PULL_TIMEOUT = 8.0
STALE_SECONDS = 2.0
#: why an unload or a scale-down ended a stream: the supervisor's reason, passed by the worker to the model process
UNLOADED = re.compile(rf"model '{UID}' was unloaded")
SCALED_DOWN = re.compile(rf"replica {UID}-\d+ was removed \(scale-down\)")
LONG = "Write the numbers from 1 to 3000 in words, one per line, without stopping."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(
        tmp_path_factory.mktemp("cut-home"),
        env={
            "XINFERENCE_STREAM_PULL_TIMEOUT": str(PULL_TIMEOUT),
            "XINFERENCE_STALE_STREAM_SECONDS": str(STALE_SECONDS),
        },
    )
    try:
        launched = httpx.post(
            f"{server.api}/models",
            timeout=300,
            json={
                "model_name": DEFAULT_MODEL,
                "model_engine": "llama.cpp",
                "model_uid": UID,
                "n_parallel": 1,
                "max_queued": 0,
            },
        )
        assert launched.status_code == 200, launched.text
        yield server
    finally:
        server.stop_and_reap()


def _serving(server: LocalServer) -> dict[str, Any]:
    """The model's info, loading it again first when an earlier test unloaded it."""
    info = httpx.get(f"{server.api}/models/{UID}", timeout=30).json()
    if info.get("status") == "unloaded":
        assert httpx.post(f"{server.api}/models/{UID}/load", timeout=300).status_code == 200
        info = httpx.get(f"{server.api}/models/{UID}", timeout=30).json()
    return info


def _stream(
    server: LocalServer,
    path: str,
    body: dict[str, Any],
    after_first: Callable[[], None] | None = None,
    events: list[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """POST a streamed request and read it to its end: ``(event name, data)`` pairs (name "" for plain frames).
    ``after_first`` runs, on another thread, once the first generated text arrived."""
    events = [] if events is None else events
    fired: list[threading.Thread] = []
    name = ""
    with httpx.stream("POST", f"{server.endpoint}{path}", json=body, timeout=300) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((name, line[len("data: ") :]))
                name = ""
                if after_first is not None and not fired and _has_text(*events[-1]):
                    fired.append(threading.Thread(target=after_first))
                    fired[0].start()
    for thread in fired:
        thread.join(120)
    return events


def _has_text(name: str, data: str) -> bool:
    """Whether an event carries generated text (a chat chunk's content, a Messages or Responses text delta)."""
    return (
        name in ("content_block_delta", "response.output_text.delta") or re.search(r'"content":"[^"]', data) is not None
    )


def _unload(server: LocalServer) -> Callable[[], None]:
    def unload() -> None:
        response = httpx.post(f"{server.api}/models/{UID}/unload", timeout=120)
        assert response.status_code == 200, response.text

    return unload


def test_unload_mid_chat_stream_ends_with_an_error_frame_then_done(server: LocalServer) -> None:
    _serving(server)
    events = _stream(
        server,
        "/v1/chat/completions",
        after_first=_unload(server),
        body={
            "model": UID,
            "stream": True,
            "max_tokens": 3000,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": LONG}],
        },
    )
    datas = [data for _, data in events]
    assert datas[-1] == "[DONE]", datas[-3:]
    error = json.loads(datas[-2])["error"]
    assert error["code"] == "request_interrupted" and error["type"] == "service_unavailable"
    assert UNLOADED.search(error["message"]), error["message"]
    assert sum('"content"' in d for d in datas[:-2]) >= 1  # the text made before the unload came first
    assert not any('"finish_reason":"stop"' in d or '"finish_reason":"length"' in d for d in datas)


def test_unload_mid_messages_stream_ends_with_an_error_event(server: LocalServer) -> None:
    _serving(server)
    events = _stream(
        server,
        "/v1/messages",
        after_first=_unload(server),
        body={"model": UID, "stream": True, "max_tokens": 3000, "messages": [{"role": "user", "content": LONG}]},
    )
    name, data = events[-1]
    assert name == "error", events[-3:]
    body = json.loads(data)
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    assert UNLOADED.search(body["error"]["message"]), body
    assert not any(n == "message_stop" for n, _ in events)


def test_unload_mid_responses_stream_ends_with_response_failed(server: LocalServer) -> None:
    _serving(server)
    events = _stream(
        server,
        "/v1/responses",
        after_first=_unload(server),
        body={"model": UID, "stream": True, "max_output_tokens": 3000, "input": LONG},
    )
    name, data = events[-1]
    assert name == "response.failed", events[-3:]
    response = json.loads(data)["response"]
    assert response["status"] == "failed" and response["error"]["code"] == "request_interrupted"
    assert UNLOADED.search(response["error"]["message"]), response["error"]
    assert not any(n == "response.completed" for n, _ in events)


def test_unload_during_a_whole_response_is_a_503_naming_it(server: LocalServer) -> None:
    _serving(server)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(
            httpx.post,
            f"{server.api}/chat/completions",
            timeout=300,
            json={
                "model": UID,
                "max_tokens": 3000,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": LONG}],
            },
        )
        time.sleep(3)  # generating (3000 tokens take far longer)
        assert not answer.done(), answer.result().text
        _unload(server)()
        response = answer.result(120)
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "request_interrupted" and UNLOADED.search(error["message"]), error


def test_a_removed_replica_ends_its_stream_with_an_error_and_the_other_goes_on(server: LocalServer) -> None:
    _serving(server)
    added = httpx.post(f"{server.api}/models/{UID}/replicas", json={"replica": 1}, timeout=300)
    assert added.status_code == 200, added.text
    body = {
        "model": UID,
        "stream": True,
        "max_tokens": 3000,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": LONG}],
    }
    streams: list[list[tuple[str, str]]] = [[], []]
    removed = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        readers = [pool.submit(_read_until_removed, server, body, streams[i], removed) for i in range(2)]
        deadline = time.monotonic() + 120
        while not all(any('"content"' in d for _, d in s) for s in streams):  # both generating, one per replica
            assert time.monotonic() < deadline, "the two streams never both produced"
            time.sleep(0.05)
        replica_id = added.json()["replicas"][0]["replica_uid"].rsplit("-", 1)[1]
        gone = httpx.delete(f"{server.api}/models/{UID}/replicas/{replica_id}", timeout=120)
        assert gone.status_code == 200, gone.text
        removed.set()
        for reader in readers:
            reader.result(120)
    ended = [s for s in streams if any('"error"' in d for _, d in s)]
    assert len(ended) == 1, [s[-2:] for s in streams]
    error = json.loads(ended[0][-2][1])["error"]
    assert ended[0][-1][1] == "[DONE]" and error["code"] == "request_interrupted", ended[0][-3:]
    assert SCALED_DOWN.search(error["message"]) and replica_id in error["message"], error


def _read_until_removed(
    server: LocalServer, body: dict[str, Any], events: list[tuple[str, str]], removed: threading.Event
) -> None:
    """Read a stream until it ends, or until it got more text after the replica's removal (the survivor)."""
    with httpx.stream("POST", f"{server.endpoint}/v1/chat/completions", json=body, timeout=300) as response:
        assert response.status_code == 200
        after = 0
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(("", line[len("data: ") :]))
                after += removed.is_set()
                if after > 20:
                    return  # still streaming well after the removal: this one was on the other replica


def test_a_frozen_model_process_ends_its_stream_within_the_deadline_and_frees_its_slot(server: LocalServer) -> None:
    info = _serving(server)
    pid = info["replicas"][0]["pid"]
    assert len(info["replicas"]) == 1 and pid
    stopped_at: list[float] = []

    def freeze() -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped_at.append(time.monotonic())

    try:
        events = _stream(
            server,
            "/v1/chat/completions",
            after_first=freeze,
            body={
                "model": UID,
                "stream": True,
                "max_tokens": 3000,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": LONG}],
            },
        )
        waited = time.monotonic() - stopped_at[0]
        assert PULL_TIMEOUT - 1 <= waited <= PULL_TIMEOUT + 6, f"the stream ended {waited:.1f}s after the freeze"
        assert events[-1][1] == "[DONE]"
        error = json.loads(events[-2][1])["error"]
        assert error["code"] == "replica_unreachable", error
        assert f"did not answer for {PULL_TIMEOUT:g} s" in error["message"] and f"model '{UID}'" in error["message"]
        # its slot is free: with one slot and max_queued 0 a held slot would make this a 429 at once; admitted, it
        # waits for the frozen process
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            second = pool.submit(
                httpx.post,
                f"{server.api}/chat/completions",
                timeout=300,
                json={"model": UID, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]},
            )
            time.sleep(2)
            assert not second.done(), second.result().text
            os.kill(pid, signal.SIGCONT)
            stopped_at.clear()
            response = second.result(120)
        assert response.status_code == 200, response.text
    finally:
        if stopped_at:
            os.kill(pid, signal.SIGCONT)
    again = _stream(
        server,
        "/v1/chat/completions",
        body={"model": UID, "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert again[-1][1] == "[DONE]" and not any('"error"' in d for _, d in again)


def test_a_stream_the_api_stops_reading_is_ended_by_the_model_process_with_the_reason(server: LocalServer) -> None:
    _serving(server)
    api_pid = server.process.pid
    frozen: list[bool] = []

    def freeze_the_api() -> None:
        os.kill(api_pid, signal.SIGSTOP)
        frozen.append(True)
        time.sleep(STALE_SECONDS + 2.5)  # past the model process's stale limit and one sweep of its reaper
        os.kill(api_pid, signal.SIGCONT)
        frozen.clear()

    try:
        events = _stream(
            server,
            "/v1/chat/completions",
            after_first=freeze_the_api,
            body={
                "model": UID,
                "stream": True,
                "max_tokens": 3000,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": LONG}],
            },
        )
    finally:
        if frozen:
            os.kill(api_pid, signal.SIGCONT)
    assert events[-1][1] == "[DONE]"
    error = json.loads(events[-2][1])["error"]
    assert error["code"] == "request_interrupted", error
    assert re.search(r"stream s\d+ of model 'cut' was not read for \d+ s and was ended", error["message"]), error
