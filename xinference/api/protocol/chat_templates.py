"""Request and response of ``POST /v1/chat_templates/render``: a chat template previewed on a conversation.

Used by the web UI's Register page (and any script checking a template before registering a model). The template
runs through the same renderer, with the same limits, as at serving time (``model/prompt_render.py``); a template
that exceeds them is a 400 naming the limit.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_TEMPLATE_CHARS", "RenderTemplateRequest", "RenderTemplateResponse", "SAMPLE_CONVERSATION"]

MAX_TEMPLATE_CHARS = 65536

#: The conversation rendered when the request gives none.
SAMPLE_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
]


class RenderTemplateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chat_template: str = Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)
    messages: list[dict[str, Any]] | None = Field(default=None, max_length=64)
    add_generation_prompt: bool = True
    bos_token: str = Field(default="", max_length=64)
    eos_token: str = Field(default="", max_length=64)


class RenderTemplateResponse(BaseModel):
    prompt: str
    messages: list[dict[str, Any]]
