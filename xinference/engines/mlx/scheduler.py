"""The decode loop of the MLX engine: one thread owns the model and serves every request.

Two modes, chosen at load:

- **batch** (``max_num_seqs > 1`` and an mlx-lm whose ``BatchGenerator`` takes per-sequence samplers, logits
  processors and stop sequences, 0.31 and later): continuous batching. Each turn of the loop admits waiting
  requests into mlx-lm's batch generator, removes the ones whose client went away, then calls ``next()`` once:
  one prefill chunk or one decode step for every running sequence. A cancelled request therefore leaves at the
  next token, and a long prompt never stalls the others for more than a chunk.
- **single** (``max_num_seqs == 1``, or an older mlx-lm): requests wait in a queue and decode one at a time with
  ``mlx_lm.generate.generate_step``; cancel is checked before every token.

Either way each token goes through :meth:`Scheduler._accept`: stop tokens, stop strings (text before a stop string
is sent, the text that could begin one is held back), ``max_tokens``, a grammar that is complete, and incomplete
UTF-8 held until its next bytes; its log-probability is recorded when the request asked. Output goes to the
request's :class:`Sink`, called on this thread (it must only hand data over): the Transformers engine's sinks
(:mod:`xinference.engines.continuous.outputs`) read ``params``, ``generated`` and ``token_logprobs`` only.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from xinference.engines.mlx.sampling import GrammarMask, SamplingParams
from xinference.errors import EngineError, ModelUnavailable, XinferenceError

__all__ = ["Scheduler", "Sequence", "Sink", "batch_api_available", "held_back"]

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a sequence's output goes; called on the scheduler thread."""

    @property
    def cancelled(self) -> bool:
        """True once the requester went away: the sequence stops at its next token."""

    def on_text(self, seq: Sequence, text: str) -> None: ...

    def on_finish(self, seq: Sequence, reason: str) -> None: ...

    def on_error(self, seq: Sequence, error: XinferenceError) -> None: ...


@dataclass(eq=False)
class Sequence:
    """One request while it decodes. ``sampler`` None is greedy; ``processors`` edit the logits first."""

    prompt_ids: list[int]
    params: SamplingParams
    sink: Sink
    sampler: Any = None
    processors: list[Any] = field(default_factory=list)
    #: the grammar mask among ``processors``, when the output is constrained
    grammar: GrammarMask | None = None
    generated: list[int] = field(default_factory=list)
    #: per generated token when ``params.logprobs``: (token id, logprob, [(alternative id, logprob), ...])
    token_logprobs: list[tuple[int, float, list[tuple[int, float]]]] = field(default_factory=list)
    emitted_chars: int = 0
    finish_reason: str | None = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None or self.sink.cancelled


def batch_api_available() -> bool:
    """Whether the installed mlx-lm has the batch generator this module drives (per-sequence sampling)."""
    try:
        generate = importlib.import_module("mlx_lm.generate")  # ``from mlx_lm import generate`` is a function
    except ImportError:
        return False
    batch = getattr(generate, "BatchGenerator", None)
    if batch is None or not hasattr(generate, "StopSequences"):
        return False
    wanted = {"samplers", "logits_processors", "stop_sequences", "max_tokens"}
    return wanted <= set(inspect.signature(batch.insert).parameters)


class Scheduler:
    """Owns the model on one thread. ``start()`` once (it loads), ``submit`` requests, ``stop()`` at unload."""

    def __init__(self, loader: Callable[[], tuple[Any, Any]], *, max_num_seqs: int, prefill_step_size: int,
                 name: str = "mlx") -> None:
        self.model: Any = None
        self.tokenizer: Any = None
        self.max_num_seqs = max_num_seqs
        self.prefill_step_size = prefill_step_size
        self.mode = "batch"
        self._name = name
        self._loader = loader
        self._loaded = threading.Event()
        self._load_error: BaseException | None = None
        self._waiting: deque[Sequence] = deque()
        self._running: dict[int, Sequence] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._generator: Any = None
        # counters (read by stats() from any thread; ints are replaced atomically)
        self.steps = 0
        self.max_batch_seen = 0
        self.finished = 0
        self.aborted = 0
        self.generated_tokens = 0

    # -- control (any thread) ----------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()

    def wait_loaded(self) -> None:
        """Block until the loader returned; re-raise what it raised."""
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
        running = sum(1 for seq in list(self._running.values()) if not seq.done)
        return {"mode": self.mode, "decode_steps": self.steps, "running": running,
                "waiting": len(self._waiting), "max_batch_seen": self.max_batch_seen,
                "max_num_seqs": self.max_num_seqs, "finished": self.finished, "aborted": self.aborted,
                "generated_tokens": self.generated_tokens}

    # -- the loop (scheduler thread) ---------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self.model, self.tokenizer = self._loader()
            if self.max_num_seqs == 1 or not batch_api_available():
                if self.max_num_seqs > 1:
                    logger.warning("%s: this mlx-lm has no per-sequence batch generator; decoding one request at "
                                   "a time", self._name)
                self.mode, self.max_num_seqs = "single", 1
            else:
                self._generator = self._new_generator()
        except BaseException as exc:  # noqa: BLE001 - handed to wait_loaded
            self._load_error = exc
            self._loaded.set()
            return
        self._loaded.set()
        while True:
            with self._cond:
                while not self._stopping and not self._waiting and not self._running:
                    self._cond.wait()
                if self._stopping:
                    break
            try:
                if self.mode == "batch":
                    self._batch_turn()
                else:
                    self._single_request()
            except XinferenceError as exc:
                self._fail_running(exc)
            except Exception as exc:  # noqa: BLE001 - a backend failure fails the requests, not the thread
                logger.exception("%s: decoding failed", self._name)
                self._fail_running(EngineError(f"MLX failed: {type(exc).__name__}: {exc}"))
        self._shutdown()

    def _new_generator(self) -> Any:
        from mlx_lm.generate import BatchGenerator

        return BatchGenerator(self.model, completion_batch_size=self.max_num_seqs,
                              prefill_batch_size=min(self.max_num_seqs, 8),
                              prefill_step_size=self.prefill_step_size)

    def _fail_running(self, error: XinferenceError) -> None:
        running, self._running = list(self._running.values()), {}
        for seq in running:
            if seq.finish_reason is None:
                seq.sink.on_error(seq, error)
        if self.mode == "batch":
            self._generator = self._new_generator()  # its state after a failed step is unknown

    def _shutdown(self) -> None:
        error = ModelUnavailable("the model was unloaded")
        with self._cond:
            waiting, self._waiting = list(self._waiting), deque()
        for seq in waiting + list(self._running.values()):
            if seq.finish_reason is None:
                seq.sink.on_error(seq, error)
        self._running = {}
        if self._generator is not None:
            self._generator.close()
            self._generator = None

    def _next_waiting(self) -> Sequence | None:
        """The next waiting request whose client is still there (abandoned ones are counted and dropped)."""
        while True:
            with self._cond:
                if not self._waiting:
                    return None
                seq = self._waiting.popleft()
            if not seq.sink.cancelled:
                return seq
            self.aborted += 1

    # batch mode
    def _batch_turn(self) -> None:
        from mlx_lm.generate import StopSequences

        generator = self._generator
        while len(self._running) < self.max_num_seqs:
            seq = self._next_waiting()
            if seq is None:
                break
            stops = StopSequences([[t] for t in sorted(seq.params.stop_token_ids)])
            (uid,) = generator.insert([seq.prompt_ids], max_tokens=[seq.params.max_tokens], samplers=[seq.sampler],
                                      logits_processors=[seq.processors], stop_sequences=[stops])
            self._running[uid] = seq
        self.max_batch_seen = max(self.max_batch_seen, len(self._running))
        self._drop_done()
        if not self._running:
            return
        _, responses = generator.next()
        if responses:
            self.steps += 1
        for response in responses:
            seq = self._running.get(response.uid)
            if seq is None or seq.done:
                continue
            reason = response.finish_reason
            if reason == "stop" and response.token in seq.params.stop_token_ids:
                self._emit(seq, final=True)
                self._finish(seq, "stop")
            else:
                self._accept(seq, int(response.token), response.logprobs, limit_reached=reason is not None)
            if reason is not None:
                del self._running[response.uid]  # the generator already let it go
        self._drop_done()

    def _drop_done(self) -> None:
        """Remove finished and abandoned sequences from the generator (a cancelled one frees its row now)."""
        gone = [uid for uid, seq in self._running.items() if seq.done]
        if not gone:
            return
        for uid in gone:
            if self._running.pop(uid).finish_reason is None:
                self.aborted += 1
        self._generator.remove(gone)

    # single mode
    def _single_request(self) -> None:
        import mlx.core as mx
        from mlx_lm.generate import generate_step
        from mlx_lm.sample_utils import greedy_sampler

        seq = self._next_waiting()
        if seq is None:
            return
        self._running[0] = seq
        self.max_batch_seen = max(self.max_batch_seen, 1)
        try:
            steps = generate_step(mx.array(seq.prompt_ids), self.model, max_tokens=seq.params.max_tokens,
                                  sampler=seq.sampler or greedy_sampler, logits_processors=seq.processors or None,
                                  prefill_step_size=self.prefill_step_size)
            for count, (token, logprobs) in enumerate(steps, start=1):
                if seq.sink.cancelled or self._stopping:
                    break
                self.steps += 1
                if int(token) in seq.params.stop_token_ids:
                    self._emit(seq, final=True)
                    self._finish(seq, "stop")
                else:
                    self._accept(seq, int(token), logprobs, limit_reached=count >= seq.params.max_tokens)
                if seq.done:
                    break
            if seq.finish_reason is None and seq.sink.cancelled:
                self.aborted += 1
            elif seq.finish_reason is None and not self._stopping:
                self._emit(seq, final=True)
                self._finish(seq, "length")
        finally:
            if not self._stopping:
                self._running.pop(0, None)

    # -- output ------------------------------------------------------------------------------------------------
    def _accept(self, seq: Sequence, token: int, logprobs: Any, *, limit_reached: bool) -> None:
        """Record a generated token, send the text now safe to send, and end the sequence when it should."""
        if seq.grammar is not None and seq.grammar.error is not None:
            seq.finish_reason = "error"  # leaves the batch at once; the others go on
            self.finished += 1
            seq.sink.on_error(seq, EngineError(f"MLX: {seq.grammar.error}"))
            return
        seq.generated.append(token)
        self.generated_tokens += 1
        if seq.params.logprobs:
            _record_logprobs(seq, logprobs, token)
        grammar_done = seq.grammar is not None and seq.grammar.matcher.done
        final = limit_reached or grammar_done or len(seq.generated) >= seq.params.max_tokens
        if self._emit(seq, final=final) or grammar_done:
            self._finish(seq, "stop")
        elif final:
            self._finish(seq, "length")

    def _emit(self, seq: Sequence, final: bool) -> bool:
        """Send the new text; True when a stop string was reached (only the text before it is sent)."""
        text = self.tokenizer.decode(seq.generated, skip_special_tokens=True)
        stops = seq.params.stop
        safe, hit = len(text), False
        if stops:
            search_from = max(0, seq.emitted_chars - max(len(s) for s in stops))
            found = [i for i in (text.find(s, search_from) for s in stops) if i >= 0]
            if found:
                safe, hit = min(found), True
            elif not final:
                safe = len(text) - held_back(text, stops)
        if not final and not hit and text.endswith("\ufffd"):
            safe = min(safe, len(text) - 1)  # an incomplete UTF-8 character: wait for its next bytes
        if safe > seq.emitted_chars:
            seq.sink.on_text(seq, text[seq.emitted_chars:safe])
            seq.emitted_chars = safe
        return hit

    def _finish(self, seq: Sequence, reason: str) -> None:
        seq.finish_reason = reason
        self.finished += 1
        seq.sink.on_finish(seq, reason)


def _record_logprobs(seq: Sequence, logprobs: Any, token: int) -> None:
    """The chosen token's log-probability and the ``top_logprobs`` best, from the processed distribution (after
    penalties and the grammar's mask, before temperature), as the Transformers engine reports them."""
    import mlx.core as mx

    row = logprobs.reshape(-1)
    top: list[tuple[int, float]] = []
    count = seq.params.top_logprobs
    if count > 0:
        ids = mx.argpartition(-row, kth=count - 1)[:count]
        pairs = zip(ids.tolist(), row[ids].tolist(), strict=True)
        top = sorted(((int(i), float(v)) for i, v in pairs), key=lambda pair: -pair[1])
    seq.token_logprobs.append((token, float(row[token].item()), top))


def held_back(text: str, stops: tuple[str, ...]) -> int:
    """How many trailing characters of ``text`` could begin a stop string (not sent until the next token)."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest
