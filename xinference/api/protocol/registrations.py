"""Request model of ``POST /v1/model_registrations/{model_type}`` (Xinference's payload)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xinference.errors import InvalidRequest

__all__ = ["MODEL_TYPES", "RegisterModelRequest", "canonical_model_type"]

MODEL_TYPES = ("LLM", "embedding", "rerank")


def canonical_model_type(value: str) -> str:
    """``llm`` → ``LLM``; an unknown type is a 400 listing the known ones."""
    for known in MODEL_TYPES:
        if known.lower() == value.lower():
            return known
    raise InvalidRequest(f"unknown model type {value[:40]!r}; use one of {', '.join(MODEL_TYPES)}", param="model_type")


class RegisterModelRequest(BaseModel):
    """``model`` is the family as a JSON string (as Xinference's client sends it) or as an object."""

    model_config = ConfigDict(extra="forbid")

    model: str | dict[str, Any]
    persist: bool = False
    worker_ip: str | None = Field(default=None, description="accepted for compatibility; must be null")

    def family(self) -> dict[str, Any]:
        if self.worker_ip:
            raise InvalidRequest("registering on one worker only is not supported", param="worker_ip")
        if isinstance(self.model, dict):
            return self.model
        try:
            data = json.loads(self.model)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"'model' is not valid JSON: {exc}", param="model") from None
        if not isinstance(data, dict):
            raise InvalidRequest("'model' must be a JSON object describing the model family", param="model")
        return data
