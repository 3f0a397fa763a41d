"""What llama.cpp's slots are doing, for :meth:`LlamaCppEngine.stats` and so for ``/metrics``.

Two sources, each read at scrape time:

- :class:`SlotLoad` counts the requests this adapter has handed to llama.cpp and not seen end. llama.cpp gives a
  free slot to the next task at once, so the first ``n_parallel`` of them decode and the rest wait in its queue:
  busy slots and waiting requests follow from that count exactly, under a lock, without asking llama.cpp anything.
- :class:`ServerCounters` reads llama.cpp's own Prometheus page through xllamacpp's in-process
  ``Server.handle_metrics`` (no HTTP): prompt and generated tokens, decode calls. That call waits for llama.cpp's
  loop to take the task, up to one decode step, so it runs on a thread of its own and a scrape waits for it only
  briefly; when the loop is slower the previous reading is returned and the late one kept for the next scrape.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator

from xinference.engines.managed.engine import parse_metrics

__all__ = ["LLAMA_METRICS", "ServerCounters", "SlotLoad"]

logger = logging.getLogger(__name__)

#: llama.cpp's metric names (without its ``llamacpp:`` prefix) and the keys ``stats()`` gives them, close to the
#: names the vLLM adapter uses for the same figures. Tokens and seconds count finished prompts and requests.
LLAMA_METRICS: dict[str, str] = {
    "prompt_tokens_total": "prompt_tokens",
    "prompt_tokens_cached_total": "prompt_tokens_cached",
    "prompt_seconds_total": "prompt_seconds",
    "tokens_predicted_total": "generation_tokens",
    "tokens_predicted_seconds_total": "generation_seconds",
    "n_decode_total": "decode_calls",
    "n_busy_slots_per_decode": "busy_slots_per_decode",
    "n_tokens_max": "max_sequence_tokens",
}

_PREFIX = "llamacpp:"


class SlotLoad:
    """Requests between this adapter and llama.cpp: ``queued`` ones wait for a thread of the engine's pool (only
    past its size), ``active`` ones are inside llama.cpp, in a slot or in its queue.

    Called from the actor's loop (queueing, whole-response calls) and from pool threads (start and end of a
    streamed request): every change takes the lock, once per request, never per token.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._queued = 0
        self._active = 0

    def queue(self) -> None:
        """A request was handed to the pool; :meth:`start` or :meth:`unqueue` follows."""
        with self._lock:
            self._queued += 1

    def unqueue(self) -> None:
        """A queued request that will never start (the pool refused it)."""
        with self._lock:
            self._queued -= 1

    def start(self, queued: bool = True) -> None:
        """A request goes into llama.cpp (from the pool's queue when ``queued``)."""
        with self._lock:
            if queued:
                self._queued -= 1
            self._active += 1

    def end(self) -> None:
        """A request left llama.cpp: finished, failed or cancelled."""
        with self._lock:
            self._active -= 1

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Count a request sent to llama.cpp directly (not through the pool) while the block runs."""
        self.start(queued=False)
        try:
            yield
        finally:
            self.end()

    def snapshot(self) -> dict[str, int]:
        """``slots_total`` (``n_parallel``), ``slots_busy`` (requests decoding now) and ``requests_waiting``
        (requests in llama.cpp's queue for a slot, plus any still waiting for a thread of the pool)."""
        with self._lock:
            queued, active = self._queued, self._active
        busy = min(active, self.slots)
        return {"slots_total": self.slots, "slots_busy": busy, "requests_waiting": active - busy + queued}


class ServerCounters:
    """llama.cpp's own counters (:data:`LLAMA_METRICS`), read through ``read`` (``Server.handle_metrics``) on one
    thread of their own, at most one reading at a time.

    :meth:`snapshot` is called by ``stats()`` on the actor's loop: it starts a reading unless one is under way and
    waits for it at most ``wait`` seconds, so a scrape never holds the loop longer than that.
    """

    def __init__(self, read: Callable[[], bytes | str], name: str, wait: float = 0.1) -> None:
        self._read = read
        self._wait = wait
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"llama-metrics-{name}")
        self._pending: Future[None] | None = None
        self._last: dict[str, float] = {}

    def snapshot(self) -> dict[str, float]:
        """The newest reading: this call's when llama.cpp answers within ``wait``, else an earlier one (empty
        before the first answer)."""
        pending = self._pending
        if pending is None or pending.done():
            try:
                pending = self._pending = self._pool.submit(self._refresh)
            except RuntimeError:  # closed: the model is unloading
                return dict(self._last)
        concurrent.futures.wait([pending], timeout=self._wait)
        return dict(self._last)

    def _refresh(self) -> None:
        try:
            raw = self._read()
        except Exception as exc:  # noqa: BLE001 - a failed reading keeps the previous one; metrics never raise
            logger.debug("reading llama.cpp's metrics failed: %s", exc)
            return
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        found = parse_metrics(text, {_PREFIX + name for name in LLAMA_METRICS})
        if found:
            self._last = {
                ours: found[_PREFIX + theirs] for theirs, ours in LLAMA_METRICS.items() if _PREFIX + theirs in found
            }
        else:  # llama.cpp answered with an error object (its metrics endpoint off) or nothing it knows
            logger.debug("llama.cpp's metrics page had none of the expected counters: %.200s", text)

    def close(self) -> None:
        """Stop reading (unload); a reading under way finishes on its own thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)
