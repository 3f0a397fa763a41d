"""Image parts of chat messages in the one shape the engines' own OpenAI servers read.

The platform accepts an image part in three spellings (:mod:`xinference.model.images`): OpenAI's
``{"type": "image_url", "image_url": {"url": ...}}``, the same with ``image_url`` a bare string, and the raw
Responses ``input_image`` / HF ``image`` parts a client may send to chat completions. vLLM's and SGLang's servers
read OpenAI's form; before a request is proxied to them every image part is rewritten into it, so a request that
the platform accepted never fails in the server over the spelling of a part. The URL is passed as it is: by then
the API has made it a checked ``data:`` URI, and the server decodes it and runs the model's own image processor, so
the prompt tokens it reports count the image's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xinference.model.images import ImagePart, image_parts

__all__ = ["openai_image_messages"]


def _openai_part(part: ImagePart) -> dict[str, Any]:
    inner: dict[str, Any] = {"url": part.url}
    if part.detail is not None:
        inner["detail"] = part.detail
    return {"type": "image_url", "image_url": inner}


def _is_openai_form(part: dict[str, Any]) -> bool:
    return part.get("type") == "image_url" and isinstance(part.get("image_url"), dict)


def openai_image_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every image part in OpenAI's form; the messages that change are copies (the caller's are
    never edited), the others are the same objects. :class:`~xinference.errors.InvalidRequest` naming the part when
    an image part has no URL."""
    rewritten: dict[tuple[int, int], dict[str, Any]] = {}
    for part in image_parts(messages):
        original = messages[part.message_index]["content"][part.part_index]
        if not _is_openai_form(original):
            rewritten[(part.message_index, part.part_index)] = _openai_part(part)
    if not rewritten:
        return list(messages)
    result = []
    for m, message in enumerate(messages):
        if not any(key[0] == m for key in rewritten):
            result.append(message)
            continue
        content = [rewritten.get((m, p), item) for p, item in enumerate(message["content"])]
        result.append({**message, "content": content})
    return result
