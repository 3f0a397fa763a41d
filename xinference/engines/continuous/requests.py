"""From an OpenAI request to what a batching engine's decode loop runs (Transformers, MLX): the sampling
parameters, the grammar, the number of choices.

Every field is honoured or refused with a 400 naming it; nothing is dropped silently. The tools of a request are
rendered by the chat template when it knows about tools; a template that does not (SmolLM2's) gets them described in
a system message (:mod:`xinference.model.parsers.tool_prompt`), so the model knows what it may call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xinference.engines.grammar import Constraint, constraint_for
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.model.parsers.postprocess import thinking_enabled

__all__ = ["MAX_CHOICES", "RequestPlan", "SamplingParams", "sampling_params", "template_kwargs"]

#: ``n`` above this is refused: each choice is a sequence of its own in the batch.
MAX_CHOICES = 8


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each token; ``temperature == 0`` is greedy."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    min_p: float = 0.0
    #: (token id, bias) added to the logits before anything else (OpenAI ``logit_bias``)
    logit_bias: tuple[tuple[int, float], ...] = ()
    #: record each chosen token's log-probability, with this many alternatives (``top_logprobs``)
    logprobs: bool = False
    top_logprobs: int = 0
    #: keep special tokens in the text (a parser needs markers such as Mistral's ``[TOOL_CALLS]``)
    keep_special: bool = False


@dataclass
class RequestPlan:
    """A validated request: the sampling parameters, the constraint (if any) and the number of choices."""

    params: SamplingParams
    constraint: Constraint | None
    n: int
    #: the engine's own model inputs for the images of the prompt (pixel values and the like), given to each
    #: choice's sequence for its prefill; None for a prompt without images
    media: Any = None


def template_kwargs(request: dict[str, Any]) -> dict[str, Any]:
    """``chat_template_kwargs`` with ``enable_thinking`` (a top-level extension too) passed to the template."""
    kwargs = dict(request.get("chat_template_kwargs") or {})
    if request.get("enable_thinking") is not None or "enable_thinking" in kwargs:
        kwargs["enable_thinking"] = thinking_enabled(request)
    return kwargs


def _logit_bias(value: Any, vocab_size: int) -> tuple[tuple[int, float], ...]:
    if not value:
        return ()
    bias: list[tuple[int, float]] = []
    for key, amount in dict(value).items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise InvalidRequest(f"logit_bias keys are token ids, not {key!r}", param="logit_bias") from None
        if not 0 <= token < vocab_size:
            raise InvalidRequest(
                f"logit_bias token {token} is outside the vocabulary (0-{vocab_size - 1})", param="logit_bias"
            )
        if not isinstance(amount, (int, float)) or not -100 <= amount <= 100:
            raise InvalidRequest("logit_bias values are numbers from -100 to 100", param="logit_bias")
        bias.append((token, float(amount)))
    return tuple(bias)


def _logprobs(kind: str, request: dict[str, Any]) -> tuple[bool, int]:
    """(record logprobs, alternatives per token) for chat (``logprobs`` + ``top_logprobs``) and completions
    (``logprobs`` as a count)."""
    value = request.get("logprobs")
    top = request.get("top_logprobs")
    if kind == "completions":
        if value is None or value is False:
            return False, 0
        count = int(value)
        if not 0 <= count <= 20:
            raise InvalidRequest("logprobs is a count from 0 to 20", param="logprobs")
        return True, count
    if top and not value:
        raise InvalidRequest("top_logprobs needs logprobs: true", param="top_logprobs")
    return bool(value), int(top or 0)


def sampling_params(
    kind: str,
    request: dict[str, Any],
    *,
    max_tokens: int,
    stop: tuple[str, ...],
    stop_token_ids: frozenset[int],
    vocab_size: int,
    tool_format: Any = None,
    engine: str = "Transformers",
) -> RequestPlan:
    """Validate ``request`` and build its plan; raises InvalidRequest/UnsupportedOption naming the field."""
    n = int(request.get("n") or 1)
    if n > MAX_CHOICES:
        raise UnsupportedOption(f"n is at most {MAX_CHOICES} on the {engine} engine", param="n")
    if kind == "completions" and request.get("response_format"):
        raise UnsupportedOption("response_format applies to chat completions", param="response_format")
    constraint = constraint_for(request, tool_format) if kind == "chat" else None
    logprobs, top = _logprobs(kind, request)
    temperature = request.get("temperature")
    return RequestPlan(
        params=SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if temperature is None else float(temperature),
            top_p=float(request.get("top_p") or 1.0),
            top_k=max(0, int(request.get("top_k") or 0)),
            min_p=float(request.get("min_p") or 0.0),
            seed=request.get("seed"),
            repetition_penalty=float(request.get("repeat_penalty") or 1.0),
            presence_penalty=float(request.get("presence_penalty") or 0.0),
            frequency_penalty=float(request.get("frequency_penalty") or 0.0),
            stop=stop,
            stop_token_ids=frozenset() if request.get("ignore_eos") else stop_token_ids,
            logit_bias=_logit_bias(request.get("logit_bias"), vocab_size),
            logprobs=logprobs,
            top_logprobs=top,
        ),
        constraint=constraint,
        n=n,
    )
