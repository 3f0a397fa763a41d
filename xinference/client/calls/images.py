"""Calls behind the image model handle: text to image, image to image, inpainting, and a request's progress."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from xinference.client.calls.base import Call, as_dict, present


# -- images ------------------------------------------------------------------------------------------------------------
def _image_file(image: str | bytes, name: str) -> tuple[str, bytes, str]:
    """An image argument (its bytes, or the path of a file holding them) as one multipart file."""
    if isinstance(image, str):
        with open(image, "rb") as handle:
            return (name, handle.read(), "application/octet-stream")
    return (name, bytes(image), "application/octet-stream")


def _image_form(
    model_uid: str,
    prompt: str | None,
    negative_prompt: str | None,
    n: int,
    size: str | None,
    response_format: str,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "model": model_uid,
        "n": str(n),
        "response_format": response_format,
        "kwargs": json.dumps(dict(kwargs)),
        **present(prompt=prompt, negative_prompt=negative_prompt, size=size),
    }


def handle_text_to_image(
    model_uid: str,
    /,
    prompt: str,
    n: int = 1,
    size: str = "1024*1024",
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """Images drawn from ``prompt``: ``{"created", "data": [{"url"} or {"b64_json"}], "seed", ...}``. ``size`` is
    ``W*H`` or ``WxH``; ``kwargs`` carries the extensions (``seed``, ``num_inference_steps``, ``guidance_scale``,
    ``negative_prompt``, ``request_id``), sent as Xinference's client sends them."""
    body = {
        "model": model_uid,
        "prompt": prompt,
        "n": n,
        "size": size,
        "response_format": response_format,
        "kwargs": json.dumps(kwargs),
    }
    return Call("POST", "/v1/images/generations", as_dict, json=body, unbounded_read=True)


def handle_image_to_image(
    model_uid: str,
    /,
    image: str | bytes,
    prompt: str,
    negative_prompt: str | None = None,
    n: int = 1,
    size: str | None = None,
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """Images redrawn from ``image`` (its bytes or a file path) following ``prompt``; without ``size``, the input's
    size. ``kwargs`` as :func:`handle_text_to_image`, plus ``strength`` (how much is redrawn, 0-1)."""
    form = _image_form(model_uid, prompt, negative_prompt, n, size, response_format, kwargs)
    return Call(
        "POST",
        "/v1/images/variations",
        as_dict,
        data=form,
        files=[("image", _image_file(image, "image"))],
        unbounded_read=True,
    )


def handle_inpainting(
    model_uid: str,
    /,
    image: str | bytes,
    mask_image: str | bytes,
    prompt: str,
    negative_prompt: str | None = None,
    n: int = 1,
    size: str | None = None,
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """``image`` repainted where ``mask_image`` is white (black is kept), following ``prompt``; answers as
    :func:`handle_text_to_image`."""
    form = _image_form(model_uid, prompt, negative_prompt, n, size, response_format, kwargs)
    files = [("image", _image_file(image, "image")), ("mask_image", _image_file(mask_image, "mask_image"))]
    return Call("POST", "/v1/images/inpainting", as_dict, data=form, files=files, unbounded_read=True)


def get_progress(request_id: str) -> Call[dict[str, Any]]:
    """``{"progress": 0.0-1.0}`` of an image request sent with ``request_id`` in its ``kwargs``."""
    return Call("GET", f"/v1/requests/{quote(request_id, safe='')}/progress", as_dict)
