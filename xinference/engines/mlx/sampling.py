"""How each token of a request is picked on MLX: the request's :class:`SamplingParams` (built and validated by the
same code as the Transformers engine's, :mod:`xinference.engines.continuous.requests`) turned into mlx-lm
samplers and logits processors.

A sampler is called with a row of log-probabilities and returns the chosen token; logits processors edit the
logits first (``logit_bias``, penalties, then a grammar's token mask). Each sampled request gets its *own* random
key, split once per token, so a ``seed`` gives the same text whether the request decodes alone or in a batch with
others (mlx's global random state would be shared by every row). Greedy requests share mlx-lm's greedy sampler,
which lets the batch generator pick all their tokens in one call.
"""

from __future__ import annotations

import secrets
from typing import Any, Callable

from xinference.engines.continuous.requests import SamplingParams
from xinference.engines.grammar import GrammarMatcher, allocate_bitmask, bitmask_to_bool

__all__ = ["REPETITION_CONTEXT", "GrammarMask", "SamplingParams", "make_processors", "make_sampler"]

#: Tokens of context the repetition penalty looks at (llama.cpp's ``repeat_last_n`` default).
REPETITION_CONTEXT = 64


class _KeyedSampler:
    """Top-k, top-p and min-p filtering, then a categorical draw with this request's own random key."""

    def __init__(self, params: SamplingParams) -> None:
        import mlx.core as mx

        self._params = params
        seed = params.seed if params.seed is not None else secrets.randbits(63)
        self._key = mx.random.key(seed & ((1 << 64) - 1))

    def __call__(self, logprobs: Any) -> Any:
        import mlx.core as mx
        from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

        params = self._params
        filtered = logprobs
        if 0 < params.top_k < logprobs.shape[-1]:
            filtered = apply_top_k(filtered, params.top_k)
        if params.top_p < 1.0:
            filtered = apply_top_p(filtered, params.top_p)
        if params.min_p > 0.0:
            filtered = apply_min_p(filtered, params.min_p)
        self._key, draw = mx.random.split(self._key)
        return mx.random.categorical(filtered * (1.0 / params.temperature), key=draw)


def make_sampler(params: SamplingParams) -> Callable[[Any], Any] | None:
    """The request's sampler, or None for greedy decoding (the generator's shared greedy sampler)."""
    return None if params.temperature <= 0 else _KeyedSampler(params)


class GrammarMask:
    """A logits processor that lets through only the tokens a grammar allows next.

    mlx-lm calls a row's processors once per step, with that row's tokens so far, *before* it hands back the token
    the step consumed: the first call follows the prompt, each later call's last token is the one sampled at the
    previous step. So this processor is the one place the matcher advances, and by the time the scheduler sees a
    token, ``matcher.done`` already accounts for it. A token the grammar refuses (never sampled, since it was
    masked) is recorded in ``error`` and the logits are left alone; the scheduler then fails that request alone.
    """

    def __init__(self, matcher: GrammarMatcher, vocab_size: int) -> None:
        self.matcher = matcher
        self.error: str | None = None
        self._row = allocate_bitmask(1, vocab_size)[0]
        self._started = False

    def __call__(self, tokens: Any, logits: Any) -> Any:
        import mlx.core as mx

        if self._started and self.error is None:
            token = int(tokens[-1].item())
            if not self.matcher.accept(token):
                self.error = f"the grammar refused token {token}: {self.matcher.error}"
        self._started = True
        if self.error is not None:
            return logits
        self.matcher.fill_bitmask(self._row)
        allowed = mx.array(bitmask_to_bool(self._row, logits.shape[-1]))
        return mx.where(allowed, logits, mx.array(-float("inf"), dtype=logits.dtype))


def make_processors(params: SamplingParams, grammar: GrammarMask | None = None) -> list[Any]:
    """Logits processors for ``logit_bias`` and the penalties (mlx-lm's own), then the grammar mask.

    ``repeat_penalty`` looks at the last :data:`REPETITION_CONTEXT` tokens, as llama.cpp does; presence and
    frequency penalties at ``max_tokens`` tokens (the whole completion).
    """
    from mlx_lm.sample_utils import make_logits_processors

    processors: list[Any] = list(
        make_logits_processors(
            logit_bias=dict(params.logit_bias) or None,
            repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1.0 else None,
            repetition_context_size=REPETITION_CONTEXT,
            presence_penalty=params.presence_penalty or None,
            presence_context_size=params.max_tokens,
            frequency_penalty=params.frequency_penalty or None,
            frequency_context_size=params.max_tokens,
        )
    )
    if grammar is not None:
        processors.append(grammar)
    return processors
