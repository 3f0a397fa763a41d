"""Speculative decoding in llama.cpp: which drafter runs, and how often its tokens are accepted.

llama.cpp drafts tokens in one of two ways, both chosen through ``common_params.speculative``:

- **a draft model** (``draft_simple``; ``draft_mtp`` for a multi-token-prediction drafter such as Gemma 4's
  ``*-assistant``): a small model with the target's vocabulary proposes up to ``speculative.draft.n_max`` tokens,
  the target verifies them in one batch;
- **n-gram lookup** (``ngram_simple``, ``ngram_map_k``, ``ngram_mod``, ...): proposals come from text already in
  the context, with no second model: it pays when the output repeats its input (code edits, quoting, templates).

The platform attaches a draft model (``enable_mtp`` from the catalog, or ``draft_model_path``) by setting
``speculative.types`` and ``speculative.draft.mparams.path``. Explicit options win: when a launch sets either of
those itself, a catalog draft is not attached (the user drives llama.cpp's speculation), and a ``draft_model_path``
only fills what the user left unset. Either way the output is the one the target alone would produce; only speed
changes.

llama.cpp reports ``draft_n`` / ``draft_n_accepted`` in each finished request's ``timings``;
:class:`SpeculationCounters` adds them up for ``Engine.stats()``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from xinference.engines.llama_cpp.config import ResolvedLlamaCppConfig
from xinference.model.draft import check_draft_compatible

__all__ = ["SELECTOR_PATHS", "SpeculationCounters", "plan_speculation"]

logger = logging.getLogger(__name__)

#: Options by which a user picks llama.cpp's speculation themselves.
SELECTOR_PATHS = ("speculative.types", "speculative.draft.mparams.path")
_DRAFT_TYPE = {"draft": "draft_simple", "mtp": "draft_mtp"}


def plan_speculation(cfg: ResolvedLlamaCppConfig, target_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(extra llama.cpp params, summary)`` for this launch's speculation; both empty when there is none.

    A draft model is checked against the target first (InvalidRequest when its vocabulary differs or, for a
    ``draft_model_path``, when it is not smaller).
    """
    user = cfg.params
    extra: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    draft = cfg.draft
    if draft is not None:
        explicit = [path for path in SELECTOR_PATHS if path in user]
        if draft.source == "catalog" and explicit:
            logger.info("speculative options %s were given: the catalog draft %s is not attached", explicit, draft.name)
            summary["ignored_draft"] = f"{draft.name} (explicit {', '.join(explicit)} win)"
        else:
            check_draft_compatible(target_path, draft)
            if "speculative.draft.mparams.path" not in user:
                extra["speculative.draft.mparams.path"] = draft.path
            if "speculative.types" not in user:
                extra["speculative.types"] = [_DRAFT_TYPE[draft.kind]]
            summary["draft"] = draft.name
            summary["draft_source"] = draft.source
    types = [t for t in (extra.get("speculative.types") or user.get("speculative.types") or []) if t != "none"]
    if not types:
        return {}, summary
    drafts_with_model = any(t.startswith("draft_") for t in types)
    if drafts_with_model and cfg.n_gpu_layers == 0 and "speculative.draft.n_gpu_layers" not in user:
        extra["speculative.draft.n_gpu_layers"] = 0  # a CPU-only target keeps its draft on the CPU too
    if drafts_with_model and "speculative.draft.cpuparams.n_threads" not in user:
        extra["speculative.draft.cpuparams.n_threads"] = cfg.n_threads
        extra["speculative.draft.cpuparams_batch.n_threads"] = cfg.n_threads_batch
    summary["types"] = types
    return extra, summary


class SpeculationCounters:
    """Drafted and accepted tokens over every finished request (updated from llama.cpp's ``timings``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.drafted = 0
        self.accepted = 0

    def note(self, timings: Any) -> None:
        """Count one finished request's ``timings`` (any thread); timings without draft figures are ignored."""
        if not isinstance(timings, dict) or "draft_n" not in timings:
            return
        with self._lock:
            self.requests += 1
            self.drafted += int(timings.get("draft_n") or 0)
            self.accepted += int(timings.get("draft_n_accepted") or 0)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            rate = self.accepted / self.drafted if self.drafted else None
            # the names vLLM's and SGLang's adapters report too
            return {
                "spec_requests": self.requests,
                "spec_draft_tokens": self.drafted,
                "spec_accepted_tokens": self.accepted,
                "spec_acceptance_rate": rate,
            }
