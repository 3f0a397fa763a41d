"""Admission control over HTTP: a model launched with one slot and ``max_queued: 1`` runs one request, queues
one, refuses the next with 429 and ``Retry-After``, and keeps serving; the numbers show in ``/metrics``."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.api.test_metrics import scrape, value
from tests.conftest import DEFAULT_MODEL, LocalServer

pytestmark = pytest.mark.slow

UID = "admission-smollm"


def _stream(endpoint: str, body: dict[str, Any], started: threading.Event | None = None) -> int:
    """Stream a chat to the end; sets ``started`` at the first chunk; returns the status code."""
    with httpx.stream(
        "POST", f"{endpoint}/v1/chat/completions", json={**body, "stream": True}, timeout=300
    ) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code
        for line in response.iter_lines():
            if started is not None and line.startswith("data: "):
                started.set()
            if line.startswith("data: ") and line != "data: [DONE]":
                assert "error" not in json.loads(line[6:])
    return 200


def test_over_limit_requests_get_429_and_the_model_keeps_serving(local_server: LocalServer) -> None:
    endpoint = local_server.endpoint
    launched = httpx.post(
        f"{local_server.api}/models",
        timeout=300,
        json={
            "model_name": DEFAULT_MODEL,
            "model_engine": "llama.cpp",
            "model_uid": UID,
            "n_parallel": 1,
            "max_queued": 1,
            "queue_timeout": 600,
        },
    )
    assert launched.status_code == 200, launched.text
    labels = {"model_name": UID, "engine": "llama.cpp"}
    try:
        long = {
            "model": UID,
            "messages": [{"role": "user", "content": "Tell a story."}],
            "max_tokens": 30,
            "ignore_eos": True,
        }
        started = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(_stream, endpoint, long, started)
            assert started.wait(120)
            second = pool.submit(_stream, endpoint, {**long, "max_tokens": 4})
            deadline = time.monotonic() + 30
            while value(scrape(endpoint), "xinference:num_requests_waiting", **labels) < 1:
                assert time.monotonic() < deadline, "the second request never queued"
                time.sleep(0.1)
            page = scrape(endpoint)
            assert value(page, "xinference:num_requests_running", **labels) == 1
            assert value(page, "xinference:max_queued_requests", **labels) == 1
            third = httpx.post(f"{endpoint}/v1/chat/completions", json={**long, "max_tokens": 4}, timeout=60)
            assert third.status_code == 429, third.text
            assert int(third.headers["retry-after"]) >= 1
            error = third.json()["error"]
            assert error["type"] == "rate_limit_error" and "max_queued=1" in error["message"]
            assert first.result(300) == 200 and second.result(300) == 200
        again = httpx.post(f"{endpoint}/v1/chat/completions", json={**long, "max_tokens": 4}, timeout=120)
        assert again.status_code == 200
        page = scrape(endpoint)
        assert value(page, "xinference:requests_rejected_total", **labels, reason="queue_full") == 1
        assert value(page, "xinference:requests_total", **labels, outcome="rejected") == 1
        assert value(page, "xinference:requests_total", **labels, outcome="success") == 3
        assert value(page, "xinference:request_queue_time_seconds_sum", **labels) > 0  # the second one waited
    finally:
        httpx.delete(f"{local_server.api}/models/{UID}", timeout=60)


def test_bad_limits_are_400s_naming_the_field(local_server: LocalServer) -> None:
    for field, bad in (("max_queued", -1), ("queue_timeout", 0), ("keep_alive", "soon"), ("autostart", "maybe")):
        response = httpx.post(
            f"{local_server.api}/models",
            timeout=60,
            json={"model_name": DEFAULT_MODEL, "model_uid": "never-launched", field: bad},
        )
        assert response.status_code == 400, (field, response.text)
        assert field in response.json()["error"]["message"] or response.json()["error"]["param"] == field
