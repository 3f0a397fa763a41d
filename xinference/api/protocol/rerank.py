"""Request model of ``POST /v1/rerank`` (the Jina / Cohere shape, as Xinference serves it).

``documents`` are strings or ``{"text": ...}`` objects; they reach the engine as plain strings. No engine, torch or
xoscar imports here.
"""

from __future__ import annotations

from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.protocol.common import OpenAIRequest, ResponseBody
from xinference.errors import UnsupportedOption

__all__ = ["MAX_RERANK_DOCUMENTS", "RerankDocument", "RerankList", "RerankRequest"]

MAX_RERANK_DOCUMENTS = 10_000


class RerankDocument(BaseModel):
    """A document given as an object (Cohere accepts ``{"text": ...}``)."""

    model_config = ConfigDict(extra="allow")

    text: str


class RerankRequest(OpenAIRequest):
    """``POST /v1/rerank``."""

    model: str = Field(min_length=1)
    query: str = Field(min_length=1)
    documents: list[Union[str, RerankDocument]] = Field(min_length=1, max_length=MAX_RERANK_DOCUMENTS)
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool | None = None
    # -- Xinference extensions -------------------------------------------------------------------------------
    return_len: bool | None = None
    max_chunks_per_doc: int | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: list[Union[str, RerankDocument]]) -> list[str]:
        texts = [d if isinstance(d, str) else d.text for d in value]
        for index, text in enumerate(texts):
            if not text:
                raise ValueError(f"documents[{index}] is empty")
        return texts

    def to_engine_params(self) -> dict[str, Any]:
        if self.max_chunks_per_doc not in (None, 1):
            raise UnsupportedOption("max_chunks_per_doc (splitting long documents) is not supported; documents "
                                    "longer than the model's input are truncated", param="max_chunks_per_doc")
        return {
            "query": self.query,
            "documents": list(self.documents),
            "top_n": self.top_n,
            "return_documents": bool(self.return_documents),
        }


class RerankResult(ResponseBody):
    index: int = Field(description="the document's position in the request")
    relevance_score: float
    document: RerankDocument | None = Field(default=None, description="with return_documents=true")


class RerankList(ResponseBody):
    """The body of ``POST /v1/rerank``: the documents best first (the ``top_n`` best when given)."""

    id: str
    results: list[RerankResult]
    meta: dict[str, Any] | None = None
