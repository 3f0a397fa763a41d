"""Embedding and rerank models behind a managed OpenAI server (vLLM's pooling runner): the request bodies for its
``/v1/embeddings`` and ``/v1/rerank`` routes, and its answers turned into the platform's shapes.

The platform's shapes are the sentence-transformers engine's: OpenAI's embedding ``list`` (vectors in input order,
``usage``, the model uid in ``model``; base64 encoded here, from floats, so every engine encodes alike) and
Xinference's rerank answer (``id``, ``results`` best first with ``index``, ``relevance_score`` and ``document``
only when asked for, ``meta.tokens``). vLLM returns every document with its text and its own usage; ``top_n`` is
applied here so its absence or presence never changes the scores.
"""

from __future__ import annotations

import base64
import struct
import uuid
from typing import Any

__all__ = ["embed_request", "embeddings_answer", "rerank_answer", "rerank_request"]


def embed_request(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """The server's embeddings body: the inputs (strings or token-id lists) as floats; ``dimensions`` passed on
    (the server refuses it for a model that cannot be shortened)."""
    body: dict[str, Any] = {"model": model, "input": list(request["input"]), "encoding_format": "float"}
    if request.get("dimensions") is not None:
        body["dimensions"] = int(request["dimensions"])
    return body


def embeddings_answer(data: dict[str, Any], model: str, encoding: str | None) -> dict[str, Any]:
    """The platform's embeddings answer from the server's (vectors in input order, only OpenAI's fields)."""
    rows = sorted(data.get("data") or [], key=lambda row: int(row.get("index", 0)))
    out = []
    for index, row in enumerate(rows):
        vector: list[float] = row["embedding"]
        if encoding == "base64":
            packed = struct.pack(f"<{len(vector)}f", *vector)
            out.append({"object": "embedding", "index": index, "embedding": base64.b64encode(packed).decode("ascii")})
        else:
            out.append({"object": "embedding", "index": index, "embedding": vector})
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or 0)
    return {
        "object": "list",
        "data": out,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": int(usage.get("total_tokens") or tokens)},
    }


def rerank_request(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """The server's rerank body: every document scored (``top_n`` is applied to the answer)."""
    documents = list(request["documents"])
    return {"model": model, "query": request["query"], "documents": documents, "top_n": len(documents)}


def rerank_answer(
    data: dict[str, Any], documents: list[str], top_n: int | None, return_documents: bool
) -> dict[str, Any]:
    """The platform's rerank answer (best first, ``top_n`` of them) from the server's ``results``."""
    scored = sorted(
        ((int(row["index"]), float(row["relevance_score"])) for row in data.get("results") or []),
        key=lambda item: item[1],
        reverse=True,
    )
    if top_n is not None:
        scored = scored[:top_n]
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
    return {
        "id": str(uuid.uuid4()),
        "results": [
            {
                "index": index,
                "relevance_score": score,
                "document": {"text": documents[index]} if return_documents else None,
            }
            for index, score in scored
        ],
        "meta": {
            "api_version": None,
            "billed_units": None,
            "tokens": {"input_tokens": tokens, "output_tokens": 0},
            "warnings": None,
        },
    }
