"""Xinference's image handle, from its official client and from ours (sync and async), on the shared server with
the tiny random Stable Diffusion pipeline: text to image, image to image and inpainting answer images of the sizes
asked for, a seed in ``kwargs`` repeats them, and a request's progress is readable by its id."""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer
from xinference.client import AsyncClient, Client, ClientError, RESTfulImageModelHandle

pytestmark = pytest.mark.slow


def _size(item: dict[str, Any]) -> tuple[int, int]:
    from PIL import Image

    if "b64_json" in item and item["b64_json"]:
        data = base64.b64decode(item["b64_json"])
    else:
        data = httpx.get(item["url"], timeout=30).content
    return Image.open(io.BytesIO(data)).size  # type: ignore[no-any-return]


def _png(size: tuple[int, int], color: int = 255) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (color, color, color)).save(out, format="PNG")
    return out.getvalue()


def test_the_official_client_draws_edits_and_inpaints(local_server: LocalServer, tiny_sd_uid: str) -> None:
    from xinference_client import RESTfulClient

    model = RESTfulClient(local_server.endpoint).get_model(tiny_sd_uid)
    drawn = model.text_to_image("a cat", n=2, size="96*64", response_format="b64_json", seed=5)
    assert [_size(item) for item in drawn["data"]] == [(96, 64), (96, 64)]
    again = model.text_to_image("a cat", n=2, size="96*64", response_format="b64_json", seed=5)
    assert again["data"] == drawn["data"]
    redrawn = model.image_to_image(_png((80, 64)), "blue", response_format="url", strength=0.6)
    assert _size(redrawn["data"][0]) == (80, 64)
    painted = model.inpainting(_png((64, 64)), _png((64, 64)), "x", size="64*64", response_format="b64_json")
    assert _size(painted["data"][0]) == (64, 64)
    edited = model.image_edit(_png((72, 64)), "y", response_format="b64_json")
    assert _size(edited["data"][0]) == (72, 64)


def test_our_handle_and_progress(local_server: LocalServer, tiny_sd_uid: str) -> None:
    with Client(local_server.endpoint) as client:
        model = client.get_model(tiny_sd_uid)
        assert isinstance(model, RESTfulImageModelHandle)
        drawn = model.text_to_image("a tree", size="64x64", response_format="b64_json", request_id="client-img-1")
        assert _size(drawn["data"][0]) == (64, 64)
        assert client.get_progress("client-img-1") == {"progress": 1.0}
        with pytest.raises(ClientError, match="no image request runs"):
            client.get_progress("client-img-never")
        painted = model.inpainting(_png((64, 64)), _png((64, 64), 0), "z", response_format="b64_json", seed=1)
        assert _size(painted["data"][0]) == (64, 64) and painted["seed"] == 1
        with pytest.raises(ClientError, match="size"):
            model.text_to_image("a tree", size="65x64")


def test_the_async_handle(local_server: LocalServer, tiny_sd_uid: str) -> None:
    async def run() -> None:
        async with AsyncClient(local_server.endpoint) as client:
            model = await client.get_model(tiny_sd_uid)
            drawn = await model.text_to_image("a boat", n=2, size="64x72", response_format="b64_json")
            assert [_size(item) for item in drawn["data"]] == [(64, 72), (64, 72)]
            redrawn = await model.image_to_image(_png((64, 64)), "red", response_format="b64_json")
            assert _size(redrawn["data"][0]) == (64, 64)

    asyncio.run(run())
