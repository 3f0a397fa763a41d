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

from xinference.api.protocol.chat_templates import SAMPLE_CONVERSATION, RenderTemplateRequest, RenderTemplateResponse
from xinference.errors import TooManyRequests
from xinference.model.prompt_render import DEFAULT_LIMITS, render

__all__ = ["PreviewPool", "attach_router"]

router = APIRouter()


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


@router.post("/v1/chat_templates/render")
async def render_template(body: RenderTemplateRequest) -> RenderTemplateResponse:
    messages = body.messages if body.messages is not None else SAMPLE_CONVERSATION
    job = functools.partial(render, body.chat_template, messages, add_generation_prompt=body.add_generation_prompt,
                            special_tokens={"bos_token": body.bos_token, "eos_token": body.eos_token},
                            limits=DEFAULT_LIMITS)
    prompt = await _POOL.run(job)
    return RenderTemplateResponse(prompt=prompt, messages=messages)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
