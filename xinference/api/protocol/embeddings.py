"""Request model of ``POST /v1/embeddings`` (OpenAI's shape).

``input`` is a string, a list of strings, a list of token ids, or a list of token-id lists; the request normalises
it into a list of items (strings or token-id lists) for the engine. No engine, torch or xoscar imports here.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, field_validator

from xinference.api.protocol.common import OpenAIRequest, ResponseBody

__all__ = ["MAX_EMBEDDING_INPUTS", "EmbeddingList", "EmbeddingRequest"]

#: OpenAI's own limit on the number of inputs of one request.
MAX_EMBEDDING_INPUTS = 2048

EmbeddingInput = Union[str, list[str], list[int], list[list[int]]]


class EmbeddingRequest(OpenAIRequest):
    """``POST /v1/embeddings``."""

    input: EmbeddingInput
    model: str = Field(min_length=1)
    dimensions: int | None = Field(default=None, ge=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("input")
    @classmethod
    def _input(cls, value: EmbeddingInput) -> list[Union[str, list[int]]]:
        items: list[Union[str, list[int]]]
        if isinstance(value, str):
            items = [value]
        elif value and all(isinstance(v, int) for v in value):
            items = [list(value)]  # type: ignore[arg-type]  # one token array
        else:
            items = list(value)  # type: ignore[arg-type]
        if not items:
            raise ValueError("input must not be empty")
        if len(items) > MAX_EMBEDDING_INPUTS:
            raise ValueError(f"at most {MAX_EMBEDDING_INPUTS} inputs per request")
        for index, item in enumerate(items):
            if isinstance(item, str) and not item:
                raise ValueError(f"input[{index}] is an empty string")
            if isinstance(item, list) and not item:
                raise ValueError(f"input[{index}] is an empty token list")
        return items

    def to_engine_params(self) -> dict[str, Any]:
        return {"input": self.input, "encoding_format": self.encoding_format, "dimensions": self.dimensions}


class Embedding(ResponseBody):
    object: Literal["embedding"]
    index: int
    embedding: Union[list[float], str] = Field(description="floats, or base64 of little-endian float32 with "
                                                           "encoding_format=base64")


class EmbeddingUsage(ResponseBody):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(ResponseBody):
    """The body of ``POST /v1/embeddings``: one vector per input, in input order."""

    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
