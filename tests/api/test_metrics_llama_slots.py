"""llama.cpp's slot figures on ``GET /metrics`` of the shared server: ``xinference:engine_slots_*`` follow the
streams a model decodes, and llama.cpp's own token counters are on the page."""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

import httpx
import pytest

from tests.api.test_metrics import scrape, value
from tests.conftest import DEFAULT_MODEL, LocalServer

pytestmark = pytest.mark.slow

UID = "metrics-llama-slots"
SLOTS = 2


@pytest.fixture(scope="module")
def slots_model(local_server: LocalServer) -> Iterator[str]:
    response = httpx.post(
        f"{local_server.api}/models",
        timeout=300,
        json={
            "model_name": DEFAULT_MODEL,
            "model_engine": "llama.cpp",
            "model_uid": UID,
            "n_parallel": SLOTS,
            "n_ctx": 4096,
        },
    )
    assert response.status_code == 200, response.text
    try:
        yield UID
    finally:
        httpx.delete(f"{local_server.api}/models/{UID}", timeout=60)


def slot_figures(endpoint: str) -> tuple[float, float, float]:
    samples = scrape(endpoint)
    return tuple(
        value(samples, f"xinference:engine_{name}", model_name=UID, engine="llama.cpp")  # type: ignore[return-value]
        for name in ("slots_total", "slots_busy", "requests_waiting")
    )


def test_busy_slots_follow_open_streams(local_server: LocalServer, slots_model: str) -> None:
    endpoint = local_server.endpoint
    # the gateway lists a model's replicas for the engine series once it has routed a request to it
    first = httpx.post(
        f"{endpoint}/v1/chat/completions",
        timeout=120,
        json={"model": slots_model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
    )
    assert first.status_code == 200, first.text
    assert slot_figures(endpoint) == (SLOTS, 0, 0)
    body = {
        "model": slots_model,
        "messages": [{"role": "user", "content": "Tell a long story."}],
        "max_tokens": 900,
        "ignore_eos": True,
        "stream": True,
    }
    with contextlib.ExitStack() as streams:
        client = streams.enter_context(httpx.Client(timeout=120))
        lines = []  # kept: a dropped line iterator closes its response, and the server cancels the request
        for _ in range(SLOTS):
            response = streams.enter_context(client.stream("POST", f"{endpoint}/v1/chat/completions", json=body))
            assert response.status_code == 200
            lines.append(response.iter_lines())
            next(lines[-1])  # a first chunk: the request decodes in a slot
        assert slot_figures(endpoint) == (SLOTS, SLOTS, 0)
    # the clients went away: the server cancels both requests and llama.cpp frees the slots
    deadline = time.monotonic() + 120
    while slot_figures(endpoint)[1:] != (0, 0):
        assert time.monotonic() < deadline, "the slots never freed"
        time.sleep(0.1)
    samples = scrape(endpoint)  # llama.cpp's own counters: the first call's 3 tokens at least
    assert value(samples, "xinference:engine_generation_tokens", model_name=UID) >= 3
    assert value(samples, "xinference:engine_decode_calls", model_name=UID) >= 3
