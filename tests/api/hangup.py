"""How long the hang-up tests let the next request on a one-slot llama.cpp server wait, once the request before it
lost its client (``test_disconnect_agent_apis.py``, ``gateway/test_disconnect_non_streamed.py``)."""

from __future__ import annotations

__all__ = ["LLAMA_CPP_CONNECTION_POLL_S", "freed_slot_wait"]

#: A non-streamed request goes to llama.cpp's own HTTP server, which looks at the waiting connection once a second
#: (``HTTP_POLLING_SECONDS`` in its server context) and cancels the task when it finds it closed: an abandoned
#: request keeps its slot up to that long. Measured here: the next request waited either ~0.1 s or ~1.03 s.
LLAMA_CPP_CONNECTION_POLL_S = 1.0


def freed_slot_wait(step: float) -> float:
    """Seconds the next request may wait: 150 decoding steps of ``step`` seconds (its own prompt and tokens, with
    room for a busy machine) plus llama.cpp's poll. A slot the abandoned request kept would take ~1850 steps."""
    return 150 * step + LLAMA_CPP_CONNECTION_POLL_S
