"""Embedding and rerank models on llama.cpp: how a GGUF file is pooled, the requests of llama.cpp's
``/v1/embeddings`` and ``/v1/rerank`` handlers, and the scores of its rerank answer.

llama.cpp serves a model either for generation or, with ``embedding`` set, for one vector (or one score) per
input: the hidden states are pooled as ``pooling_type`` says (mean, the first token, the last token, or ``rank``:
the first token through the classification head). The GGUF header names the model's own pooling
(``<arch>.pooling_type``, written by the converters from the sentence-transformers config); a launch option
overrides it. A file without one cannot be served as an embedding model without that option, and a reranker
must carry its classification head (``cls`` / ``cls.output`` tensors), which is checked before anything loads.

Pure functions: the engine reads the header, calls llama.cpp and hands the results here; the answers' shapes are
built by :mod:`xinference.engines.answers`, as on every engine.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from xinference.engines.answers import rerank_answer, served_scores
from xinference.errors import InvalidRequest, LaunchFailed

if TYPE_CHECKING:
    from xinference.model.gguf_info import GgufInfo

__all__ = [
    "POOLING_NAMES",
    "choose_pooling",
    "embed_body",
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
    scored = [(index, _sigmoid(score) if activation == "sigmoid" else score) for index, score in served_scores(result)]
    usage = result.get("usage") or {}
    return rerank_answer(scored, documents, top_n, return_documents, int(usage.get("prompt_tokens") or 0))


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)
