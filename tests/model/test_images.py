"""Finding and decoding the images of chat messages (xinference.model.images)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from xinference.errors import InvalidRequest, RequestTooLarge
from xinference.model.images import count_images, data_uri, decode_data_uri, decode_image, image_parts, load_images


def _png(width: int = 4, height: int = 3, color: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_image_parts_in_order_with_their_paths() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "compare"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
                {"type": "input_image", "image_url": data_uri(_png(), "image/png")},
            ],
        },
    ]
    parts = list(image_parts(messages))
    assert [p.param for p in parts] == ["messages[1].content[1].image_url", "messages[1].content[2].image_url"]
    assert parts[0].detail == "low" and parts[0].url.startswith("https://")
    assert count_images(messages) == 2


def test_image_part_without_url_names_the_part() -> None:
    with pytest.raises(InvalidRequest) as caught:
        list(image_parts([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]))
    assert caught.value.param == "messages[0].content[0].image_url"


def test_decode_round_trip_gives_rgb_pixels() -> None:
    messages = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_uri(_png(5, 7), "image/png")}}]}
    ]
    (image,) = load_images(messages)
    assert image.size == (5, 7) and image.mode == "RGB" and image.getpixel((0, 0)) == (255, 0, 0)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("https://example.com/a.png", "data: URI"),
        ("data:image/png,rawbytes", "base64"),
        ("data:image/png;base64,@@@notbase64", "not valid base64"),
    ],
)
def test_bad_data_uris_are_refused(url: str, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        decode_data_uri(url, "messages[0].content[0].image_url")


def test_oversize_payload_and_pixels_are_refused() -> None:
    with pytest.raises(RequestTooLarge):
        decode_data_uri(data_uri(b"x" * 2000, "image/png"), "p", max_bytes=1000)
    with pytest.raises(RequestTooLarge, match="pixels"):
        decode_image(_png(100, 100), "p", max_pixels=50 * 50)


def test_not_an_image_is_refused_with_its_param() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_image(b"%PDF-1.4 not an image", "messages[2].content[0].image_url")
    assert caught.value.param == "messages[2].content[0].image_url"
    assert "cannot be read" in str(caught.value)
