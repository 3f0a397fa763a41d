"""How each token of a request is picked: OpenAI/llama.cpp sampling fields turned into mlx-lm samplers and logits
processors.

A sampler is called with a row of log-probabilities and returns the chosen token; logits processors edit the
logits first (penalties, ``logit_bias``, a grammar's token mask). Each sampled request gets its *own* random key,
split once per token, so a ``seed`` gives the same text whether the request decodes alone or in a batch with
others (mlx's global random state would be shared by every row). Greedy requests share mlx-lm's greedy sampler,
which lets the batch generator pick all their tokens in one call.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["SamplingParams", "make_processors", "make_sampler"]

#: Tokens of context the repetition penalty looks at (llama.cpp's ``repeat_last_n`` default).
REPETITION_CONTEXT = 64


@dataclass(frozen=True)
class SamplingParams:
    """One request's decoding settings; ``temperature == 0`` is greedy, ``top_k == 0`` and ``top_p == 1`` are off."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


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
    return None if params.greedy else _KeyedSampler(params)


def make_processors(params: SamplingParams, extra: tuple[Callable[[Any, Any], Any], ...] = ()) -> list[Any]:
    """Logits processors for the penalties and ``logit_bias`` (mlx-lm's own), then ``extra`` (a grammar mask).

    ``repeat_penalty`` looks at the last :data:`REPETITION_CONTEXT` tokens, as llama.cpp does; presence and
    frequency penalties at the whole completion (``max_tokens`` tokens of context).
    """
    from mlx_lm.sample_utils import make_logits_processors

    processors: list[Any] = list(make_logits_processors(
        logit_bias=dict(params.logit_bias) or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1.0 else None,
        repetition_context_size=REPETITION_CONTEXT,
        presence_penalty=params.presence_penalty or None,
        presence_context_size=params.max_tokens,
        frequency_penalty=params.frequency_penalty or None,
        frequency_context_size=params.max_tokens,
    ))
    processors.extend(extra)
    return processors
