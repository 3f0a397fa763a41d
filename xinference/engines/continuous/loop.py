"""The decode loop the in-process batching engines share (Transformers, MLX): one thread owns the model.

:class:`DecodeLoop` is what is the same in both: the thread that loads the model and then turns the loop, the
queue of waiting sequences, ``submit``/``wake``/``stop`` from other threads, the counters behind ``stats()``, and
what happens to each token once the backend picked it: incremental detokenization
(:mod:`.detokenize`), stop strings (text before a stop string is sent, text that could begin one is held back),
``max_tokens``, a grammar that is complete, and failures. A subclass brings the backend: :meth:`DecodeLoop._turn`
admits waiting sequences and runs one step for the running ones, :meth:`DecodeLoop._live` lists those, and
:meth:`DecodeLoop._reset_batch` forgets the batch after a failed step.

A sequence whose requester went away (``sink.cancelled``: a dropped stream, or a cancelled non-streamed call)
is skipped in the queue and taken out of the batch by the subclass at its next step; either way it counts in
``aborted``. Sinks are called on the loop's thread and must only hand data over.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, ContextManager, Protocol

from xinference.engines.continuous.detokenize import IncrementalDecoder
from xinference.engines.continuous.requests import SamplingParams
from xinference.errors import EngineError, ModelUnavailable, XinferenceError

__all__ = ["DecodeLoop", "Sequence", "Sink", "held_back"]

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a sequence's output goes. Called on the loop's thread; implementations only hand data over."""

    @property
    def cancelled(self) -> bool:
        """True once the requester went away: the sequence leaves the batch at the next step."""

    def on_text(self, seq: Sequence, text: str) -> None: ...

    def on_finish(self, seq: Sequence, reason: str) -> None: ...

    def on_error(self, seq: Sequence, error: XinferenceError) -> None: ...


@dataclass(eq=False)
class Sequence:
    """One request's choice while it decodes; each engine subclasses it for its sampling state."""

    prompt_ids: list[int]
    params: SamplingParams
    sink: Sink
    generated: list[int] = field(default_factory=list)
    #: per generated token when ``params.logprobs``: (token id, logprob, [(alternative id, logprob), ...])
    token_logprobs: list[tuple[int, float, list[tuple[int, float]]]] = field(default_factory=list)
    finish_reason: str | None = None
    #: decoded text not sent yet: it could be the start of a stop string
    pending: str = ""
    #: the engine's inputs for the prompt's images (:attr:`RequestPlan.media`); dropped once prefilled
    media: Any = None
    decoder: IncrementalDecoder = field(init=False)

    def __post_init__(self) -> None:
        self.decoder = IncrementalDecoder(skip_special=not self.params.keep_special)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None or self.sink.cancelled


class DecodeLoop(abc.ABC):
    """The model's thread and its queue; ``start()`` once (it loads), ``submit`` sequences, ``stop()`` at unload."""

    #: the engine's name in error messages
    engine_label: ClassVar[str] = "the engine"

    def __init__(self, loader: Callable[[], tuple[Any, Any]], *, max_num_seqs: int, name: str) -> None:
        self.model: Any = None
        self.tokenizer: Any = None
        self.max_num_seqs = max_num_seqs
        self._name = name
        self._loader = loader
        self._loaded = threading.Event()
        self._load_error: BaseException | None = None
        self._waiting: deque[Sequence] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        # counters (read by stats() from any thread; ints are replaced atomically)
        self.steps = 0
        self.max_batch_seen = 0
        self.finished = 0
        self.aborted = 0
        self.generated_tokens = 0

    # -- what a backend brings -----------------------------------------------------------------------------------
    def _on_loaded(self) -> None:  # noqa: B027 - an optional hook, empty unless a backend needs it
        """On the loop's thread right after the loader; what it raises fails the load."""

    def _loop_context(self) -> ContextManager[Any]:
        """Entered around the whole loop (torch's inference mode, say)."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def _turn(self) -> None:
        """Admit waiting sequences, drop finished and abandoned ones, run one step for the rest."""

    @abc.abstractmethod
    def _live(self) -> list[Sequence]:
        """The sequences in the batch now."""

    @abc.abstractmethod
    def _reset_batch(self) -> None:
        """Forget the batch (its sequences have been told): after a failed step, and at shutdown."""

    def _release(self) -> None:
        """Free the backend's batch state at shutdown."""
        self._reset_batch()

    # -- control (any thread) ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread; it first calls ``loader()`` for ``(model, tokenizer)`` (see ``wait_loaded``)."""
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()

    def wait_loaded(self) -> None:
        """Block until the loader returned; re-raise what it (or ``_on_loaded``) raised."""
        self._loaded.wait()
        if self._load_error is not None:
            raise self._load_error

    def submit(self, seq: Sequence) -> None:
        with self._cond:
            if self._stopping:
                raise ModelUnavailable("the model is shutting down")
            self._waiting.append(seq)
            self._cond.notify()

    def wake(self) -> None:
        """Have the loop look at its sequences now (a client went away)."""
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def stats(self) -> dict[str, Any]:
        """Counters; ``running`` counts the unfinished sequences in the batch (an abandoned one until it has left)."""
        running = sum(1 for seq in self._live() if seq.finish_reason is None)
        return {
            "decode_steps": self.steps,
            "running": running,
            "waiting": len(self._waiting),
            "max_batch_seen": self.max_batch_seen,
            "max_num_seqs": self.max_num_seqs,
            "finished": self.finished,
            "aborted": self.aborted,
            "generated_tokens": self.generated_tokens,
        }

    # -- the loop (its thread) ---------------------------------------------------------------------------------
    def _main(self) -> None:
        # Loading and decoding on this one thread: torch's CPU thread pool belongs to the calling thread, and a
        # second pool left spinning by another thread slows a small machine down.
        try:
            self.model, self.tokenizer = self._loader()
            self._on_loaded()
        except BaseException as exc:  # noqa: BLE001 - handed to wait_loaded
            self._load_error = exc
            self._loaded.set()
            return
        self._loaded.set()
        with self._loop_context():
            while True:
                with self._cond:
                    while not self._stopping and not self._waiting and not self._live():
                        self._cond.wait()
                    if self._stopping:
                        break
                try:
                    self._turn()
                except XinferenceError as exc:
                    self._fail_running(exc)
                except Exception as exc:  # noqa: BLE001 - a backend failure fails the batch, not the thread
                    logger.exception("%s: decoding failed", self._name)
                    self._fail_running(EngineError(f"{self.engine_label} failed: {type(exc).__name__}: {exc}"))
        self._shutdown()

    def _fail_running(self, error: XinferenceError) -> None:
        for seq in self._live():
            if seq.finish_reason is None:
                seq.sink.on_error(seq, error)
        self._reset_batch()

    def _shutdown(self) -> None:
        error = ModelUnavailable("the model was unloaded")
        with self._cond:
            waiting, self._waiting = list(self._waiting), deque()
        for seq in waiting + self._live():
            if seq.finish_reason is None:
                seq.sink.on_error(seq, error)
        self._release()

    def _next_waiting(self) -> Sequence | None:
        """The next waiting sequence whose requester is still there (abandoned ones are counted and dropped)."""
        while True:
            with self._cond:
                if not self._waiting:
                    return None
                seq = self._waiting.popleft()
            if not seq.sink.cancelled:
                return seq
            self.aborted += 1

    def _put_back(self, seqs: list[Sequence]) -> None:
        """Return sequences taken with :meth:`_next_waiting` to the head of the queue, in their order."""
        with self._cond:
            self._waiting.extendleft(reversed(seqs))

    def _left_batch(self, seq: Sequence) -> None:
        """Count a sequence the subclass took out of the batch (``aborted`` when it had not ended)."""
        if seq.finish_reason is None:
            self.aborted += 1

    # -- each token ----------------------------------------------------------------------------------------------
    def _append(self, seq: Sequence, token: int) -> None:
        seq.generated.append(token)
        self.generated_tokens += 1

    def _after_token(self, seq: Sequence, *, limit_reached: bool = False, grammar_done: bool = False) -> None:
        """Send the text now safe to send and end the sequence when a stop string, the grammar or a limit says so."""
        final = limit_reached or grammar_done or len(seq.generated) >= seq.params.max_tokens
        if self._emit(seq, final=final) or grammar_done:
            self._finish(seq, "stop")
        elif final:
            self._finish(seq, "length")

    def _stop_token(self, seq: Sequence) -> None:
        """A stop token came (it is not part of the output): send what is held back and end."""
        self._emit(seq, final=True)
        self._finish(seq, "stop")

    def _emit(self, seq: Sequence, final: bool) -> bool:
        """Send the new text; True when a stop string was reached (only the text before it is sent)."""
        text = seq.pending + seq.decoder.step(self.tokenizer, seq.generated, final=final)
        stops = seq.params.stop
        safe, hit = len(text), False
        if stops:
            found = [i for i in (text.find(s) for s in stops) if i >= 0]
            if found:
                safe, hit = min(found), True
            elif not final:
                safe = len(text) - held_back(text, stops)
        if safe > 0:
            seq.sink.on_text(seq, text[:safe])
        seq.pending = text[safe:]
        return hit

    def _finish(self, seq: Sequence, reason: str) -> None:
        seq.finish_reason = reason
        self.finished += 1
        seq.sink.on_finish(seq, reason)

    def _fail(self, seq: Sequence, error: XinferenceError) -> None:
        """End one sequence with an error; it leaves the batch at the next step, the others go on."""
        seq.finish_reason = "error"
        self.finished += 1
        seq.sink.on_error(seq, error)


def held_back(text: str, stops: tuple[str, ...]) -> int:
    """How many trailing characters of ``text`` could begin a stop string (not sent until the next token)."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest
