"""Images on llama.cpp: the multimodal projector it loads, and the image parts of a chat request.

llama.cpp's server sees images through ``mtmd`` once ``common_params.mmproj`` names a projector GGUF (the vision
tower and the layers that map its output into the language model's embeddings). It then takes OpenAI's
``image_url`` parts with ``data:`` URIs, decodes them itself (stb_image: PNG, JPEG, BMP, GIF, ...), runs them
through the vision tower and places their embeddings where each part was; ``usage.prompt_tokens`` counts them.

Before loading, :func:`check_projector` refuses a file that is not a vision projector, with a message naming it
(llama.cpp's own check of the projector against the model, its embedding width, fails the load after it).
Per request, :func:`image_messages` hands llama.cpp every image as an ``image_url`` part whatever spelling the
client used (``input_image``, ``image``) and re-encodes, as PNG, the formats stb_image cannot read (WebP, TIFF...)
with :mod:`xinference.model.images` (the API has already checked that every image decodes); a model launched
without a projector refuses images with a 400 that names the first one.
"""

from __future__ import annotations

import io
import os
from typing import Any

from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.images import data_uri, decode_data_uri, decode_image, image_parts

__all__ = ["LLAMA_IMAGE_TYPES", "check_projector", "has_images", "image_messages", "without_image_data"]

#: Media types llama.cpp's decoder reads as sent; any other image is re-encoded as PNG first.
LLAMA_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/jpg", "image/bmp", "image/gif"})


def check_projector(path: str, model_uid: str) -> str:
    """The projector type of the GGUF at ``path`` (``mlp``, ``gemma3``, ``qwen2.5vl_merger``, ...); LaunchFailed
    when the file is not a multimodal projector with a vision encoder."""
    from xinference.model.gguf_info import read_gguf_metadata

    name = os.path.basename(path)
    try:
        meta = read_gguf_metadata(path)
    except (OSError, ValueError) as exc:
        raise LaunchFailed(
            f"the multimodal projector {name} of {model_uid} is not a readable GGUF file: {exc}"
        ) from exc
    arch = meta.get("general.architecture")
    if arch != "clip":
        raise LaunchFailed(
            f"{name} is not a multimodal projector (its architecture is {arch!r}, a projector's is 'clip'): "
            f"launch {model_uid} with multimodal_projector naming the model's mmproj file"
        )
    if not meta.get("clip.has_vision_encoder"):
        raise LaunchFailed(
            f"the projector {name} has no vision encoder (an audio-only projector): it cannot see images"
        )
    kind = meta.get("clip.projector_type") or meta.get("clip.vision.projector_type")
    return str(kind) if kind else "unknown"


def has_images(messages: Any) -> bool:
    """Whether the chat ``messages`` carry an image part (malformed parts included: they are refused later)."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in ("image_url", "input_image", "image") for part in content
        ):
            return True
    return False


def image_messages(messages: list[dict[str, Any]], *, projector: bool, model_uid: str) -> list[dict[str, Any]]:
    """``messages`` with every image part as llama.cpp reads it: ``{"type": "image_url", "image_url": {"url":
    <data: URI>}}``, re-encoded as PNG when llama.cpp cannot decode its format. Decoding is CPU work: call it off the
    event loop. InvalidRequest names the part when the model has no projector or an image is not a valid one."""
    parts = list(image_parts(messages))
    if not parts:
        return messages
    if not projector:
        raise InvalidRequest(
            f"{model_uid} was launched without a multimodal projector, so it cannot see images; relaunch it with "
            "multimodal_projector (one of the spec's multimodal_projectors, or the path of the model's mmproj file)",
            param=parts[0].param,
        )
    out = [dict(message) for message in messages]
    for part in parts:
        media_type, data = decode_data_uri(part.url, part.param)
        if media_type.lower() in LLAMA_IMAGE_TYPES:
            url = part.url  # the API checked that it decodes; llama.cpp decodes it again itself
        else:
            buffer = io.BytesIO()
            decode_image(data, part.param).save(buffer, format="PNG")
            url = data_uri(buffer.getvalue(), "image/png")
        message = out[part.message_index]
        content = list(message["content"])
        content[part.part_index] = {"type": "image_url", "image_url": {"url": url}}
        message["content"] = content
        out[part.message_index] = message
    return out


def without_image_data(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every ``image_url`` part's URL emptied, for rendering the chat template in Python (a
    template places an image, it never prints its bytes; a large ``data:`` URI would only weigh on the renderer's
    bounds)."""
    if not has_images(messages):
        return messages
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": ""}}
                if isinstance(part, dict) and part.get("type") == "image_url"
                else part
                for part in content
            ]
            message = {**message, "content": content}
        out.append(message)
    return out
