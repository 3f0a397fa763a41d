"""Generation by model uid through OpenAI's routes (chat, completions, embeddings, rerank)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xinference.client.calls.base import Call, Message, as_dict


# -- generation by model uid (OpenAI's routes) ------------------------------------------------------------------------
def chat_completion(
    model_uid: str, messages: Sequence[Message], stream: bool = False, **params: Any
) -> Call[dict[str, Any]]:
    """``POST /v1/chat/completions``; ``params`` are OpenAI's fields (``max_tokens``, ``temperature``, ``tools``)."""
    body = {**params, "model": model_uid, "messages": [dict(m) for m in messages], "stream": stream}
    return Call("POST", "/v1/chat/completions", as_dict, json=body, stream=stream)


def completions(model_uid: str, prompt: str, stream: bool = False, **params: Any) -> Call[dict[str, Any]]:
    """``POST /v1/completions``: a text completion of ``prompt``."""
    body = {**params, "model": model_uid, "prompt": prompt, "stream": stream}
    return Call("POST", "/v1/completions", as_dict, json=body, stream=stream)


def embeddings(
    model_uid: str, input: str | list[str] | list[int] | list[list[int]], **params: Any
) -> Call[dict[str, Any]]:
    """``POST /v1/embeddings`` (OpenAI shape: ``data[i].embedding``, ``usage``)."""
    return Call("POST", "/v1/embeddings", as_dict, json={**params, "model": model_uid, "input": input})


def rerank(
    model_uid: str,
    query: str,
    documents: list[str],
    top_n: int | None = None,
    return_documents: bool = False,
    **params: Any,
) -> Call[dict[str, Any]]:
    """``POST /v1/rerank``: documents ordered by relevance to ``query`` (``results[i].relevance_score``)."""
    body = {**params, "model": model_uid, "query": query, "documents": documents, "return_documents": return_documents}
    if top_n is not None:
        body["top_n"] = top_n
    return Call("POST", "/v1/rerank", as_dict, json=body)
