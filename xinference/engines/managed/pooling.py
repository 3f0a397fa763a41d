"""Embedding and rerank models behind a managed OpenAI server (vLLM's pooling runner): the request bodies for its
``/v1/embeddings`` and ``/v1/rerank`` routes, and its answers turned into the platform's shapes.

The platform's shapes are built by :mod:`xinference.engines.answers`, as on every engine (the embeddings answer by
its ``served_embeddings_answer``). vLLM returns every document with its text and its own usage; ``top_n`` is
applied here so its absence or presence never changes the scores.
"""

from __future__ import annotations

from typing import Any

from xinference.engines import answers

__all__ = ["embed_request", "rerank_answer", "rerank_request"]


def embed_request(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """The server's embeddings body: the inputs (strings or token-id lists) as floats; ``dimensions`` passed on
    (the server refuses it for a model that cannot be shortened)."""
    body: dict[str, Any] = {"model": model, "input": list(request["input"]), "encoding_format": "float"}
    if request.get("dimensions") is not None:
        body["dimensions"] = int(request["dimensions"])
    return body


def rerank_request(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """The server's rerank body: every document scored (``top_n`` is applied to the answer)."""
    documents = list(request["documents"])
    return {"model": model, "query": request["query"], "documents": documents, "top_n": len(documents)}


def rerank_answer(
    data: dict[str, Any], documents: list[str], top_n: int | None, return_documents: bool
) -> dict[str, Any]:
    """The platform's rerank answer (best first, ``top_n`` of them) from the server's ``results``."""
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
    return answers.rerank_answer(answers.served_scores(data), documents, top_n, return_documents, tokens)
