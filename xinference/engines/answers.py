"""The platform's embeddings and rerank answers, built the same way by every engine that serves those models.

The shapes are OpenAI's embedding ``list`` (vectors in input order, ``usage``, the model uid in ``model``; base64 is
little-endian float32, encoded here from floats so every engine encodes alike) and Xinference's rerank answer
(``id``, ``results`` best first with ``index``, ``relevance_score`` and ``document`` only when asked for,
``meta.tokens``). An engine computes the vectors or the (index, score) pairs and its token counts; these functions
do the rest. ``served_*`` read the answers of an OpenAI-style server (llama.cpp's handlers, vLLM's routes).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["embeddings_answer", "encode_embedding", "rerank_answer", "served_embeddings_answer", "served_scores"]


def encode_embedding(vector: list[float], encoding: str | None) -> list[float] | str:
    """One embedding as OpenAI sends it: the floats, or (``encoding`` ``base64``) base64 of little-endian float32."""
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector


def embeddings_answer(
    embeddings: Sequence[list[float] | str], model_uid: str, prompt_tokens: int, total_tokens: int | None = None
) -> dict[str, Any]:
    """The embeddings answer for already encoded ``embeddings`` (in input order); ``total_tokens`` defaults to the
    prompt's."""
    total = prompt_tokens if total_tokens is None else total_tokens
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": index, "embedding": row} for index, row in enumerate(embeddings)],
        "model": model_uid,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": total},
    }


def served_embeddings_answer(data: dict[str, Any], model_uid: str, encoding: str | None) -> dict[str, Any]:
    """The embeddings answer from a server's OpenAI-shaped one: its rows put in input order, its vectors encoded
    as asked, only OpenAI's fields kept, named after the model uid (never the server's model path)."""
    rows = sorted(data.get("data") or [], key=lambda row: int(row.get("index", 0)))
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or 0)
    return embeddings_answer(
        [encode_embedding(row["embedding"], encoding) for row in rows],
        model_uid,
        tokens,
        int(usage.get("total_tokens") or tokens),
    )


def served_scores(data: dict[str, Any]) -> list[tuple[int, float]]:
    """The (document index, score) pairs of a server's rerank answer (its ``results``), in its order."""
    return [(int(row["index"]), float(row["relevance_score"])) for row in data.get("results") or []]


def rerank_answer(
    scored: Iterable[tuple[int, float]],
    documents: Sequence[str],
    top_n: int | None,
    return_documents: bool,
    input_tokens: int,
) -> dict[str, Any]:
    """The rerank answer from (document index, score) pairs: best first (equal scores keep the pairs' order), the
    first ``top_n`` of them when it is set, each document's text only when ``return_documents``."""
    ranked = sorted(scored, key=lambda item: item[1], reverse=True)
    if top_n is not None:
        ranked = ranked[:top_n]
    return {
        "id": str(uuid.uuid4()),
        "results": [
            {
                "index": index,
                "relevance_score": score,
                "document": {"text": documents[index]} if return_documents else None,
            }
            for index, score in ranked
        ],
        "meta": {
            "api_version": None,
            "billed_units": None,
            "tokens": {"input_tokens": input_tokens, "output_tokens": 0},
            "warnings": None,
        },
    }
