"""Issue 13, item 7: a non-streamed request stops generating when its client goes away, as a stream does.

A real server with the bundled model on one llama.cpp slot: a client asks for 2000 tokens without streaming and
hangs up after a few decoding steps; the next request on the only slot must not wait for the other ~2000 tokens.
The bound is in decoding steps measured on the same server just before, so a busy machine cannot fail it,
plus the second llama.cpp may take to notice the closed connection (``tests/api/hangup.py``).
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.hangup import freed_slot_wait
from tests.conftest import start_local_server

pytestmark = pytest.mark.slow


def _timed(call) -> tuple[float, object]:
    started = time.monotonic()
    result = call()
    return time.monotonic() - started, result


def test_hanging_up_on_a_non_streamed_request_frees_the_slot(tmp_path) -> None:
    server = start_local_server(tmp_path)
    try:
        launched = httpx.post(
            f"{server.api}/models",
            timeout=300,
            json={"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_parallel": 1},
        )
        assert launched.status_code == 200, launched.text

        def ask(max_tokens: int, timeout: float = 600) -> httpx.Response:
            return httpx.post(
                f"{server.api}/chat/completions",
                timeout=timeout,
                json={
                    "model": "smollm2-instruct",
                    "max_tokens": max_tokens,
                    "ignore_eos": True,
                    "messages": [{"role": "user", "content": "Tell a very long story."}],
                },
            )

        seconds, reply = _timed(lambda: ask(64))
        assert reply.json()["usage"]["completion_tokens"] == 64  # type: ignore[attr-defined]
        step = seconds / 64  # one decoding step, prompt included: an overestimate
        with pytest.raises(httpx.ReadTimeout):
            ask(2000, timeout=max(1.0, 12 * step))  # the client hangs up after a few dozen steps at most
        waited, follow_up = _timed(lambda: ask(2))
        assert follow_up.status_code == 200  # type: ignore[attr-defined]
        assert waited < freed_slot_wait(step), (
            f"the next request waited {waited:.1f}s ({waited / step:.0f} steps): the abandoned request kept its slot"
        )
    finally:
        server.stop()
