"""Rerankers that are causal language models, scored by the yes/no logits of a fixed prompt (Qwen3-Reranker).

Qwen3-Reranker has no classification head: it reads a chat prompt that asks whether a document meets a query's
requirements (under an instruction) and the relevance score is the probability that the next token is ``yes``
rather than ``no``::

    score = exp(logit_yes) / (exp(logit_yes) + exp(logit_no))      # at the last prompt position

The prompt, truncation and default instruction follow the model card: the instruction, query and document form
the user turn; they are truncated to leave room for the fixed system prefix and the assistant suffix (an empty
think block), so the last position is always where the answer would start. A ``CrossEncoder`` cannot do this:
it would score the bare pair without the prompt.

Batches are padded on the left with position ids counted from each row's first real token, so a pair scores the
same alone or in a batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "CAUSAL_RERANK_ARCHITECTURES",
    "DEFAULT_INSTRUCTION",
    "PROMPT_PREFIX",
    "PROMPT_SUFFIX",
    "YesNoScorer",
    "causal_architecture",
    "unsupported_causal_reranker",
]

#: Causal-LM architectures whose rerankers this scorer serves: Qwen3-Reranker's prompt and yes/no tokens.
CAUSAL_RERANK_ARCHITECTURES: frozenset[str] = frozenset({"Qwen3ForCausalLM"})

#: The instruction the model card uses when the caller gives none (web search).
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

#: The prompt around the user turn, as the model card writes it (system turn before, assistant turn after).
PROMPT_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
PROMPT_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def causal_architecture(architectures: Iterable[str]) -> str | None:
    """The first causal-LM architecture among ``architectures`` (a reranker scored through its LM head), if any."""
    return next((name for name in architectures if name.endswith("ForCausalLM")), None)


def unsupported_causal_reranker(architectures: Iterable[str]) -> str | None:
    """Why a reranker with these architectures cannot be scored here, or None when it can (it has a
    classification head, or it is a causal LM whose prompt the scorer knows)."""
    causal = causal_architecture(architectures)
    if causal is None or causal in CAUSAL_RERANK_ARCHITECTURES:
        return None
    known = ", ".join(sorted(CAUSAL_RERANK_ARCHITECTURES))
    return (
        f"sentence_transformers scores causal-LM rerankers only with a known yes/no prompt ({known}: "
        f"Qwen3-Reranker); {causal} has none here"
    )


class YesNoScorer:
    """Scores (query, document) pairs with a causal LM's ``yes``/``no`` logits; used on the engine's one thread."""

    def __init__(
        self, model: Any, tokenizer: Any, *, device: str, max_length: int, instruction: str | None = None
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.instruction = instruction or DEFAULT_INSTRUCTION
        self._prefix: list[int] = tokenizer.encode(PROMPT_PREFIX, add_special_tokens=False)
        self._suffix: list[int] = tokenizer.encode(PROMPT_SUFFIX, add_special_tokens=False)
        self.max_length = max_length
        self._budget = max_length - len(self._prefix) - len(self._suffix)
        if self._budget < 16:
            raise ValueError(f"max_length {max_length} leaves no room for the reranker prompt ({-self._budget + 16})")
        self.yes_id = self._token_id("yes")
        self.no_id = self._token_id("no")
        pad = tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else (tokenizer.eos_token_id or 0)

    def _token_id(self, token: str) -> int:
        value = self.tokenizer.convert_tokens_to_ids(token)
        if not isinstance(value, int) or value == self.tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer has no {token!r} token, which this reranker answers with")
        return value

    def body(self, query: str, document: str) -> str:
        """The user turn of the prompt (instruction, query and document), before truncation."""
        return f"<Instruct>: {self.instruction}\n<Query>: {query}\n<Document>: {document}"

    def encode(self, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
        """The full prompt's token ids for each pair, the user turn truncated to fit ``max_length``."""
        bodies = [self.body(query, document) for query, document in pairs]
        encoded = self.tokenizer(bodies, add_special_tokens=False, truncation=True, max_length=self._budget)
        return [self._prefix + list(ids) + self._suffix for ids in encoded["input_ids"]]

    def score(self, rows: Sequence[list[int]]) -> list[float]:
        """P(yes) for each prompt in ``rows`` (one forward pass, left-padded)."""
        import torch

        longest = max(len(row) for row in rows)
        ids, mask = [], []
        for row in rows:
            padding = longest - len(row)
            ids.append([self.pad_id] * padding + row)
            mask.append([0] * padding + [1] * len(row))
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        attention = torch.tensor(mask, dtype=torch.long, device=self.device)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
        output = self.model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=1, use_cache=False
        )
        last = output.logits[:, -1, :].float()
        pair = torch.stack([last[:, self.no_id], last[:, self.yes_id]], dim=1)
        probabilities = torch.softmax(pair, dim=1)[:, 1]
        return [float(value) for value in probabilities.cpu().tolist()]
