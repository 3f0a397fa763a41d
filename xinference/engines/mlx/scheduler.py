"""The decode loop of the MLX engine: one thread owns the model and serves every request.

Two modes, chosen at load:

- **batch** (``max_num_seqs > 1`` and an mlx-lm whose ``BatchGenerator`` takes per-sequence samplers, logits
  processors and stop sequences, 0.31 and later): continuous batching. Each turn of the loop admits waiting
  requests into mlx-lm's batch generator, removes the ones whose client went away, then calls ``next()`` once:
  one decode step for every running sequence, and one prefill chunk for the prompts admitted, which the generator
  prefills together (padded to one length). A cancelled request therefore leaves at the next token, and a long
  prompt never stalls the others for more than a chunk. The KV caches of finished requests are kept (mlx-lm's
  ``LRUPromptCache``, ``prompt_cache_size`` of them): a new prompt starting like one of them (the same system
  prompt, a conversation's earlier turns) is prefilled from the longest shared prefix on, as ``mlx_lm.server``
  does; together they hold ``prompt_cache_mib`` at the most.
- **single** (``max_num_seqs == 1``, or an older mlx-lm): requests wait in a queue and decode one at a time with
  ``mlx_lm.generate.generate_step``; cancel is checked before every token.
- **vision** (a vision-language model loaded with mlx-vlm, :mod:`.vision`): as single, with mlx-vlm's
  ``generate_step``, which merges a request's image features into its prompt (``Sequence.media``) at the prefill.

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
from dataclasses import dataclass, field
from typing import Any, Callable

from xinference.engines.continuous.loop import DecodeLoop, Sink
from xinference.engines.continuous.loop import Sequence as BaseSequence
from xinference.engines.mlx.sampling import GrammarMask
from xinference.errors import EngineError

__all__ = ["Scheduler", "Sequence", "Sink", "batch_api_available"]

logger = logging.getLogger(__name__)

#: the prompt cache's model key: one scheduler serves one model
_MODEL_KEY = "model"


@dataclass(eq=False)
class Sequence(BaseSequence):
    """One request's choice with its mlx-lm sampling. ``sampler`` None is greedy; ``processors`` edit the logits
    first."""

    sampler: Any = None
    processors: list[Any] = field(default_factory=list)
    #: the grammar mask among ``processors``, when the output is constrained
    grammar: GrammarMask | None = None


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


class Scheduler(DecodeLoop):
    """Owns the model on one thread. ``start()`` once (it loads), ``submit`` requests, ``stop()`` at unload."""

    engine_label = "MLX"

    def __init__(
        self,
        loader: Callable[[], tuple[Any, Any]],
        *,
        max_num_seqs: int,
        prefill_step_size: int,
        prompt_cache_size: int = 0,
        prompt_cache_bytes: int = 1 << 30,
        name: str = "mlx",
        vision: bool = False,
    ) -> None:
        super().__init__(loader, max_num_seqs=max_num_seqs, name=name)
        self.prefill_step_size = prefill_step_size
        self.prompt_cache_size = prompt_cache_size
        self.prompt_cache_bytes = prompt_cache_bytes
        self.vision = vision
        self.mode = "batch"
        #: prompt tokens whose KV came from the prompt cache instead of a prefill
        self.prompt_tokens_reused = 0
        self._running: dict[int, Sequence] = {}
        self._generator: Any = None
        self._prompt_cache: Any = None

    def stats(self) -> dict[str, Any]:
        return {"mode": self.mode, **super().stats(), "prompt_tokens_reused": self.prompt_tokens_reused}

    # -- the backend (scheduler thread) ------------------------------------------------------------------------
    def _on_loaded(self) -> None:
        if self.vision:
            self.mode, self.max_num_seqs = "vision", 1  # mlx-lm's batch generator takes no image features
        elif self.max_num_seqs == 1 or not batch_api_available():
            if self.max_num_seqs > 1:
                logger.warning(
                    "%s: this mlx-lm has no per-sequence batch generator; decoding one request at a time", self._name
                )
            self.mode, self.max_num_seqs = "single", 1
        else:
            self._generator = self._new_generator()
            if self.prompt_cache_size > 0:
                from mlx_lm.models.cache import LRUPromptCache

                self._prompt_cache = LRUPromptCache(max_size=self.prompt_cache_size, max_bytes=self.prompt_cache_bytes)

    def _turn(self) -> None:
        if self.mode == "batch":
            self._batch_turn()
        else:
            self._single_request()

    def _live(self) -> list[BaseSequence]:
        return list(self._running.values())

    def _new_generator(self) -> Any:
        from mlx_lm.generate import BatchGenerator

        return BatchGenerator(
            self.model,
            completion_batch_size=self.max_num_seqs,
            prefill_batch_size=min(self.max_num_seqs, 8),
            prefill_step_size=self.prefill_step_size,
        )

    def _reset_batch(self) -> None:
        self._running = {}
        if self.mode == "batch":
            self._generator = self._new_generator()  # its state after a failed step is unknown

    def _release(self) -> None:
        self._running = {}
        self._prompt_cache = None
        if self._generator is not None:
            self._generator.close()
            self._generator = None

    # batch mode
    def _batch_turn(self) -> None:
        from mlx_lm.generate import StopSequences

        generator = self._generator
        while len(self._running) < self.max_num_seqs:
            seq = self._next_waiting()
            if seq is None:
                break
            assert isinstance(seq, Sequence)
            stops = StopSequences([[t] for t in sorted(seq.params.stop_token_ids)])
            cache, rest = self._cached_prefix(seq.prompt_ids)
            reused = len(seq.prompt_ids) - len(rest)
            self.prompt_tokens_reused += reused
            (uid,) = generator.insert(
                [rest],
                caches=[cache],
                all_tokens=[seq.prompt_ids[:reused]],
                max_tokens=[seq.params.max_tokens],
                samplers=[seq.sampler],
                logits_processors=[seq.processors],
                stop_sequences=[stops],
            )
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
                self._stop_token(seq)
            else:
                self._accept(seq, int(response.token), response.logprobs, limit_reached=reason is not None)
            if reason is not None:
                del self._running[response.uid]  # the generator already let it go
                if self._prompt_cache is not None and response.prompt_cache is not None:
                    self._prompt_cache.insert_cache(_MODEL_KEY, list(response.all_tokens), response.prompt_cache)
        self._drop_done()

    def _cached_prefix(self, prompt: list[int]) -> tuple[Any, list[int]]:
        """The KV cache of the longest prefix of ``prompt`` a finished request left (a copy, trimmed to it) and the
        prompt tokens still to prefill; ``(None, prompt)`` without one. At least one token is left to prefill: its
        logits give the first token."""
        if self._prompt_cache is None:
            return None, prompt
        cache, rest = self._prompt_cache.fetch_nearest_cache(_MODEL_KEY, prompt)
        if cache is None or not rest:
            return None, prompt
        return cache, list(rest)

    def _drop_done(self) -> None:
        """Remove finished and abandoned sequences from the generator (a cancelled one frees its row now)."""
        gone = [uid for uid, seq in self._running.items() if seq.done]
        if not gone:
            return
        for uid in gone:
            self._left_batch(self._running.pop(uid))
        self._generator.remove(gone)

    # single and vision modes
    def _steps(self, seq: Sequence) -> Any:
        """The token generator of one request: mlx-lm's, or mlx-vlm's for a vision model (its images merged in)."""
        import mlx.core as mx
        from mlx_lm.sample_utils import greedy_sampler

        options: dict[str, Any] = {
            "max_tokens": seq.params.max_tokens,
            "sampler": seq.sampler or greedy_sampler,
            "logits_processors": seq.processors or None,
            "prefill_step_size": self.prefill_step_size,
        }
        if self.mode == "vision":
            from xinference.engines.mlx.vision import vision_steps

            media, seq.media = seq.media, None  # the pixels are not needed after the prefill
            return vision_steps(self.model, seq.prompt_ids, media, **options)
        from mlx_lm.generate import generate_step

        return generate_step(mx.array(seq.prompt_ids), self.model, **options)

    def _single_request(self) -> None:
        seq = self._next_waiting()
        if seq is None:
            return
        assert isinstance(seq, Sequence)
        self._running[0] = seq
        self.max_batch_seen = max(self.max_batch_seen, 1)
        try:
            steps = self._steps(seq)
            for count, (token, logprobs) in enumerate(steps, start=1):
                if seq.sink.cancelled or self._stopping:
                    break
                self.steps += 1
                if int(token) in seq.params.stop_token_ids:
                    self._stop_token(seq)
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
            self._fail(seq, EngineError(f"MLX: {seq.grammar.error}"))  # leaves the batch at once; the others go on
            return
        self._append(seq, token)
        if seq.params.logprobs:
            _record_logprobs(seq, logprobs, token)
        grammar_done = seq.grammar is not None and seq.grammar.matcher.done
        self._after_token(seq, limit_reached=limit_reached, grammar_done=grammar_done)


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
