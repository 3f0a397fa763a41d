"""Issue 13, item 7, for the agent APIs: a non-streamed Messages or Responses request whose client hangs up stops
generating, as non-streamed chat does (``xinference/api/gateway/disconnect.py``).

A real server with the bundled model on one llama.cpp slot: a client asks for 2000 tokens and hangs up after a few
decoding steps; the next request on the only slot must not wait for the other ~2000 tokens, and the API counts the
abandoned request as aborted. The bound is in decoding steps measured on the same server just before, so a busy
machine cannot fail it, plus the second llama.cpp may take to notice the closed connection (``tests/api/hangup.py``).
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterator

import httpx
import pytest

from tests.api.hangup import freed_slot_wait
from tests.conftest import LocalServer, start_local_server

pytestmark = pytest.mark.slow

#: a prompt the model answers at length: neither API has llama.cpp's ignore_eos, so the abandoned request lasts as
#: long as the model's own answer (several hundred tokens, checked on chat below)
PROMPT = "Write a very long and detailed essay, at least 3000 words, on the history of the Roman Empire."
#: path → the body of a request for ``n`` tokens
BODIES: dict[str, Callable[[int], dict[str, Any]]] = {
    "/v1/messages": lambda n: {
        "model": "smollm2-instruct",
        "max_tokens": n,
        "temperature": 0,
        "messages": [{"role": "user", "content": PROMPT}],
    },
    "/v1/responses": lambda n: {"model": "smollm2-instruct", "max_output_tokens": n, "temperature": 0, "input": PROMPT},
}


@pytest.fixture(scope="module")
def one_slot_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(tmp_path_factory.mktemp("one-slot"))
    try:
        launched = httpx.post(
            f"{server.api}/models",
            timeout=300,
            json={"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_parallel": 1},
        )
        assert launched.status_code == 200, launched.text
        yield server
    finally:
        server.stop()


def _aborted(server: LocalServer, path: str) -> float:
    text = httpx.get(f"{server.endpoint}/metrics", timeout=30).text
    pattern = rf'^xinference:requests_total\{{[^}}]*outcome="aborted"[^}}]*route="{re.escape(path)}"[^}}]*\}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.MULTILINE))


@pytest.mark.parametrize("path", sorted(BODIES))
def test_hanging_up_on_a_non_streamed_agent_request_frees_the_slot(one_slot_server: LocalServer, path: str) -> None:
    url = one_slot_server.endpoint + path

    def ask(tokens: int, timeout: float = 600) -> httpx.Response:
        return httpx.post(url, json=BODIES[path](tokens), timeout=timeout)

    chat = f"{one_slot_server.api}/chat/completions"
    started = time.monotonic()
    calibration = httpx.post(
        chat,
        timeout=600,
        json={
            "model": "smollm2-instruct",
            "max_tokens": 64,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": PROMPT}],
        },
    )
    assert calibration.json()["usage"]["completion_tokens"] == 64
    step = (time.monotonic() - started) / 64  # one decoding step, prompt included: an overestimate
    aborted_before = _aborted(one_slot_server, path)
    with pytest.raises(httpx.ReadTimeout):
        ask(2000, timeout=max(1.0, 12 * step))  # the client hangs up after a few dozen steps at most
    started = time.monotonic()
    follow_up = ask(2)
    waited = time.monotonic() - started
    assert follow_up.status_code == 200, follow_up.text
    assert waited < freed_slot_wait(step), (
        f"the next request waited {waited:.1f}s ({waited / step:.0f} steps): the abandoned request kept its slot"
    )
    assert _aborted(one_slot_server, path) == aborted_before + 1
