"""``POST /v1/chat_templates/render``: preview a chat template, rendered by the platform's renderer.

The preview renders with the same renderer and limits as serving (:mod:`xinference.model.prompt_render`), so a
template that would be refused at serving time is a 400 here too. Renders run on a pool of their own: a template
may take up to the renderer's time limit, and the API process's default executor also serves the supervisor and
the worker (in ``xinference-local``), which must never wait behind previews. Past a few previews waiting, more are
refused with a 429 instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, ConfigDict, Field

from xinference.errors import TooManyRequests

__all__ = [
    "MAX_TEMPLATE_CHARS",
    "SAMPLE_CONVERSATION",
    "PreviewPool",
    "RenderTemplateRequest",
    "RenderTemplateResponse",
    "attach_router",
    "preview",
]

MAX_TEMPLATE_CHARS = 65536

#: The conversation rendered when the request gives none.
SAMPLE_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
]


# -- protocol ----------------------------------------------------------------------------------------------------------
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


# -- serving -----------------------------------------------------------------------------------------------------------
class PreviewPool:
    """At most ``threads`` previews render at once, and ``threads + waiting`` are admitted; more get a 429."""

    def __init__(self, threads: int = 2, waiting: int = 8) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="template-preview")
        self._admitted = 0
        self._capacity = threads + waiting
        self._lock = threading.Lock()

    async def run(self, func: Any) -> Any:
        with self._lock:
            if self._admitted >= self._capacity:
                raise TooManyRequests("too many chat template previews at once; retry shortly", retry_after=1)
            self._admitted += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, func)
        finally:
            with self._lock:
                self._admitted -= 1


_POOL = PreviewPool()


async def preview(body: RenderTemplateRequest) -> RenderTemplateResponse:
    """``body``'s template rendered on its conversation (the sample one when it gives none), on the preview pool."""
    # jinja2 (~60 ms, ~5 MiB) only once a preview is asked for: the API process never renders otherwise
    from xinference.model.prompt_render import DEFAULT_LIMITS, render

    messages = body.messages if body.messages is not None else SAMPLE_CONVERSATION
    job = functools.partial(
        render,
        body.chat_template,
        messages,
        add_generation_prompt=body.add_generation_prompt,
        special_tokens={"bos_token": body.bos_token, "eos_token": body.eos_token},
        limits=DEFAULT_LIMITS,
    )
    prompt = await _POOL.run(job)
    return RenderTemplateResponse(prompt=prompt, messages=messages)


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


@router.post("/v1/chat_templates/render")
async def render_template(body: RenderTemplateRequest) -> RenderTemplateResponse:
    return await preview(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
