"""``POST /v1/chat_templates/render``: preview a chat template, rendered in the server's sandbox."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, FastAPI

from xinference.api.protocol.chat_templates import SAMPLE_CONVERSATION, RenderTemplateRequest, RenderTemplateResponse
from xinference.model.chat_template import render

__all__ = ["attach_router"]

router = APIRouter()


@router.post("/v1/chat_templates/render")
async def render_template(body: RenderTemplateRequest) -> RenderTemplateResponse:
    messages = body.messages if body.messages is not None else SAMPLE_CONVERSATION
    prompt = await asyncio.to_thread(render, body.chat_template, messages, body.add_generation_prompt,
                                     bos_token=body.bos_token, eos_token=body.eos_token)
    return RenderTemplateResponse(prompt=prompt, messages=messages)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
