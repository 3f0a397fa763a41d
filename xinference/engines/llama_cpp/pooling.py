"""Embedding and rerank models on llama.cpp: how a GGUF file is pooled, and the platform's shapes for the
answers of llama.cpp's ``/v1/embeddings`` and ``/v1/rerank`` handlers.

llama.cpp serves a model either for generation or, with ``embedding`` set, for one vector (or one score) per
input: the hidden states are pooled as ``pooling_type`` says (mean, the first token, the last token, or ``rank``:
the first token through the classification head). The GGUF header names the model's own pooling
(``<arch>.pooling_type``, written by the converters from the sentence-transformers config); a launch option
overrides it. A file without one cannot be served as an embedding model without that option, and a reranker
must carry its classification head (``cls`` / ``cls.output`` tensors), which is checked before anything loads.

Pure functions: the engine reads the header, calls llama.cpp and hands the results here.
"""

from __future__ import annotations

import base64
import math
import uuid
from typing import TYPE_CHECKING, Any

from xinference.errors import InvalidRequest, LaunchFailed

if TYPE_CHECKING:
    from xinference.model.gguf_info import GgufInfo

__all__ = [
    "POOLING_NAMES",
    "choose_pooling",
    "embed_body",
    "embeddings_response",
    "rerank_body",
    "rerank_response",
    "sequence_limit",
]

#: llama.cpp's ``llama_pooling_type`` numbers (as stored in the GGUF header) and their names.
POOLING_NAMES: dict[int, str] = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}


def choose_pooling(model_type: str, option: str | None, info: GgufInfo, model: str) -> str:
    """The pooling llama.cpp is started with for a model of ``model_type``: ``rank`` for a reranker, else the launch
    ``option``, else the GGUF header's. LaunchFailed says what is missing when neither gives a usable one."""
    header = POOLING_NAMES.get(info.pooling_type) if info.pooling_type is not None else None
    if model_type == "rerank":
        if option is not None:
            raise LaunchFailed(f"pooling_type applies to embedding models; reranker {model} always uses rank pooling")
        if not info.has_classifier:
            raise LaunchFailed(
                f"{model}'s GGUF has no classification head (cls / cls.output tensors), so llama.cpp cannot score "
                "pairs with it: convert a cross-encoder (…ForSequenceClassification) to serve it as a reranker"
            )
        return "rank"
    pooling = option or header
    if pooling is None or pooling == "none":
        raise LaunchFailed(
            f"{model}'s GGUF header does not say how to pool its token vectors into one embedding "
            f"(<arch>.pooling_type is {header or 'absent'}); launch it with pooling_type=mean, cls or last "
            "(the model card says which)"
        )
    if pooling == "rank":
        raise LaunchFailed(f"{model}'s GGUF is a reranker (rank pooling); register it as a rerank model")
    return pooling


def sequence_limit(info: GgufInfo, max_tokens: int | None) -> int:
    """Tokens one input may have: the positions the model was trained for (header), else the catalog's figure."""
    return info.context_length or max_tokens or 512


def embed_body(request: dict[str, Any], normalize: bool, native_dimensions: int) -> dict[str, Any]:
    """llama.cpp's embeddings request for ``request`` (``input``: strings or token-id lists).

    Vectors are asked for as floats and L2-normalized (``embd_normalize`` 2) unless the launch turned that off
    (-1); base64 is encoded by the platform, the same way on every engine. ``dimensions`` other than the model's
    own are refused, as the sentence-transformers engine does for a model not trained to be shortened."""
    requested = request.get("dimensions")
    if requested is not None and requested != native_dimensions:
        raise InvalidRequest(
            f"this model returns {native_dimensions}-dimensional embeddings; dimensions cannot be {requested}",
            param="dimensions",
        )
    return {"input": list(request["input"]), "embd_normalize": 2 if normalize else -1, "encoding_format": "float"}


def embeddings_response(result: dict[str, Any], model_uid: str, encoding: str | None) -> dict[str, Any]:
    """The OpenAI ``list`` of embeddings from llama.cpp's answer, in input order, named after the model uid."""
    rows = sorted(result.get("data") or [], key=lambda row: int(row.get("index", 0)))
    data = []
    for index, row in enumerate(rows):
        vector: list[float] = row["embedding"]
        if encoding == "base64":
            data.append({"object": "embedding", "index": index, "embedding": _base64(vector)})
        else:
            data.append({"object": "embedding", "index": index, "embedding": vector})
    usage = result.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or 0)
    return {
        "object": "list",
        "data": data,
        "model": model_uid,
        "usage": {"prompt_tokens": tokens, "total_tokens": int(usage.get("total_tokens") or tokens)},
    }


def _base64(vector: list[float]) -> str:
    import numpy as np

    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def rerank_body(request: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's rerank request: every document is scored (``top_n`` is applied on the way back)."""
    documents = list(request["documents"])
    return {"query": request["query"], "documents": documents, "top_n": len(documents)}


def rerank_response(
    result: dict[str, Any], documents: list[str], top_n: int | None, return_documents: bool, activation: str
) -> dict[str, Any]:
    """The platform's rerank answer (Xinference's shape, best first) from llama.cpp's ``results``.

    ``activation`` ``sigmoid`` maps the classifier's logit to a 0-1 relevance score, as sentence-transformers'
    CrossEncoder does for one-label models (so a model scores alike on both engines); ``none`` keeps the logit."""
    scored = []
    for row in result.get("results") or []:
        index = int(row["index"])
        score = float(row["relevance_score"])
        scored.append((index, _sigmoid(score) if activation == "sigmoid" else score))
    scored.sort(key=lambda item: item[1], reverse=True)
    if top_n is not None:
        scored = scored[:top_n]
    usage = result.get("usage") or {}
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
            "tokens": {"input_tokens": int(usage.get("prompt_tokens") or 0), "output_tokens": 0},
            "warnings": None,
        },
    }


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)
