"""Images inside chat messages: where they are, and how an engine turns one into pixels.

Every API (chat completions, Anthropic Messages, Responses) hands engines OpenAI-shaped messages whose image parts
are ``{"type": "image_url", "image_url": {"url": ..., "detail": ...}}``. By the time a request reaches a model
process, the API has replaced every ``http(s)`` URL by a ``data:`` URI (fetched once, bounded, in the API process,
so that a model process never reaches out to a host a request names), so engines only ever decode ``data:`` URIs.

This module is the one place that knows the part's shape: engines call :func:`image_parts` to find images in order
and :func:`decode_image` to get a checked ``PIL.Image``; the API calls the same functions to refuse bad images with
a 400 that names the part (``messages[1].content[0].image_url``) before any engine sees them.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xinference.errors import InvalidRequest, RequestTooLarge

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_PIXELS",
    "ImagePart",
    "count_images",
    "data_uri",
    "decode_data_uri",
    "decode_image",
    "image_parts",
    "load_images",
]

#: The largest encoded image a request may carry (or a URL may return), in bytes.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: The largest decoded image, in pixels: guards against decompression bombs (a small PNG of 50k x 50k pixels).
MAX_IMAGE_PIXELS = 64 * 1024 * 1024

#: The content-part types that carry an image, as each API's translation leaves them: OpenAI's chat part, and the
#: raw forms a client may send to chat completions anyway (Responses' ``input_image``; ``image`` with ``image``).
_IMAGE_TYPES = ("image_url", "input_image", "image")


@dataclass(frozen=True)
class ImagePart:
    """One image in a conversation: its ``url`` (``data:`` or ``http(s):``), its ``detail`` hint, and ``param``, the
    request path that names it in errors (``messages[1].content[0].image_url``)."""

    url: str
    detail: str | None
    param: str
    message_index: int
    part_index: int


def _part_url(part: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """(url, detail, field) of an image part, whatever its spelling; url None when the part is malformed."""
    kind = part.get("type")
    if kind == "image_url":
        inner = part.get("image_url")
        if isinstance(inner, str):
            return inner, None, "image_url"
        if isinstance(inner, dict):
            url = inner.get("url")
            return (url if isinstance(url, str) else None), inner.get("detail"), "image_url"
        return None, None, "image_url"
    if kind == "input_image":
        url = part.get("image_url")
        return (url if isinstance(url, str) else None), part.get("detail"), "image_url"
    inner = part.get("image")
    return (inner if isinstance(inner, str) else None), None, "image"


def image_parts(messages: Sequence[dict[str, Any]]) -> Iterator[ImagePart]:
    """Every image part of ``messages`` in conversation order (the order engines place image tokens in).

    Raises :class:`InvalidRequest` naming the part when an image part has no URL string."""
    for m, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for p, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in _IMAGE_TYPES:
                continue
            url, detail, field = _part_url(part)
            param = f"messages[{m}].content[{p}].{field}"
            if not url:
                raise InvalidRequest("an image part needs a URL (https or a data: URI)", param=param)
            yield ImagePart(url, detail if isinstance(detail, str) else None, param, m, p)


def count_images(messages: Sequence[dict[str, Any]]) -> int:
    """How many images ``messages`` carry."""
    return sum(1 for _ in image_parts(messages))


def decode_data_uri(url: str, param: str, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[str, bytes]:
    """(media type, bytes) of a base64 ``data:`` URI; :class:`InvalidRequest` naming ``param`` when it is not one,
    :class:`RequestTooLarge` when it holds more than ``max_bytes``."""
    if not url.startswith("data:"):
        raise InvalidRequest("expected a data: URI here (http URLs are fetched by the API before this)", param=param)
    header, sep, payload = url[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        raise InvalidRequest("a data: URI image must be base64 encoded (data:image/png;base64,...)", param=param)
    media_type = header[: -len(";base64")] or "application/octet-stream"
    if len(payload) * 3 // 4 > max_bytes + 3:
        raise RequestTooLarge(f"the image is larger than {max_bytes} bytes", param=param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"the data: URI is not valid base64 ({exc})", param=param) from exc
    return media_type, data


def data_uri(data: bytes, media_type: str) -> str:
    """A base64 ``data:`` URI for ``data``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def decode_image(data: bytes, param: str, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """``data`` decoded into an RGB ``PIL.Image``; :class:`InvalidRequest` naming ``param`` when it is not an image
    PIL can read, :class:`RequestTooLarge` over ``max_pixels``. Decoding is CPU work: call it off the event loop."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as probe:
            width, height = probe.size
            if width * height > max_pixels:
                raise RequestTooLarge(
                    f"the image is {width}x{height} pixels, over the limit of {max_pixels} pixels", param=param
                )
            probe.load()
            image: Image.Image = probe.convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InvalidRequest(f"the image cannot be read ({exc.__class__.__name__}: {exc})", param=param) from exc
    except Image.DecompressionBombError as exc:
        raise RequestTooLarge(f"the image is too large to decode ({exc})", param=param) from exc
    return image


def load_images(messages: Sequence[dict[str, Any]]) -> list[Image.Image]:
    """Every image of ``messages`` as an RGB ``PIL.Image``, in conversation order: what an engine calls on a request
    the API has already checked (so the errors here only fire when an engine is driven directly)."""
    images = []
    for part in image_parts(messages):
        _, data = decode_data_uri(part.url, part.param)
        images.append(decode_image(data, part.param))
    return images
