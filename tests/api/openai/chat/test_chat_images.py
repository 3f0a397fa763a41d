"""Images in chat requests through the real server: refused to a model without vision, and checked (URL policy,
content, size) before they reach a vision model, on chat completions, Anthropic Messages and Responses, each error
in its API's shape and naming the part as the client wrote it.

The vision model is the bundled SmolLM2 GGUF registered under a name of the test's own with the ``vision``
ability (a registration, not a vision model: every request here is refused before the engine runs). The shared
server does not set ``XINFERENCE_IMAGE_URL_ALLOW_PRIVATE``, so its default policy is what is tested.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.test_images import PNG
from tests.custom_models import link_smollm2_gguf, smollm2_gguf_family
from xinference.model.images import MAX_IMAGE_BYTES

INLINE = "data:image/png;base64," + base64.b64encode(PNG).decode()
VISION_MODEL = "smol-sees"


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def chat(api: str, model: str, url: str) -> httpx.Response:
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image_part(url)]}]
    return httpx.post(f"{api}/chat/completions", json={"model": model, "messages": messages}, timeout=60)


def test_images_to_a_model_without_vision_are_a_400(local_server, model_uid: str) -> None:
    reply = chat(local_server.api, model_uid, INLINE)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert "cannot read images" in error["message"] and error["param"] == "messages[0].content[1].image_url"


@pytest.fixture(scope="module")
def vision_model(local_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = link_smollm2_gguf(tmp_path_factory.mktemp("smol-sees"), VISION_MODEL)
    family = smollm2_gguf_family(VISION_MODEL, folder, ["chat", "vision"])
    registered = httpx.post(f"{local_server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{local_server.api}/models", json={"model_name": VISION_MODEL, "model_engine": "llama.cpp"}, timeout=120
        )
        assert launched.status_code == 200, launched.text
        yield VISION_MODEL
    finally:
        httpx.delete(f"{local_server.api}/models/{VISION_MODEL}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{VISION_MODEL}", timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize(
    "url,status,needle",
    [
        ("http://127.0.0.1:9/cat.png", 400, "private, loopback or link-local"),
        ("http://169.254.169.254/latest/meta-data/", 400, "private, loopback or link-local"),
        ("http://localhost/cat.png", 400, "private, loopback or link-local"),
        ("ftp://example.com/cat.png", 400, "scheme 'ftp'"),
        ("data:image/png;base64," + base64.b64encode(b"<html></html>").decode(), 400, "cannot be read"),
        ("data:image/png;base64," + "A" * (MAX_IMAGE_BYTES * 4 // 3 + 8), 413, "larger than"),
    ],
)
def test_bad_images_are_refused_before_the_engine(
    local_server, vision_model: str, url: str, status: int, needle: str
) -> None:
    reply = chat(local_server.api, vision_model, url)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert needle in error["message"] and error["param"] == "messages[0].content[1].image_url"


@pytest.mark.slow
def test_messages_and_responses_name_their_own_parts(local_server, vision_model: str) -> None:
    private = "http://10.0.0.1/cat.png"
    content = [{"type": "text", "text": "hi"}, {"type": "image", "source": {"type": "url", "url": private}}]
    body = {"model": vision_model, "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    reply = httpx.post(f"{local_server.api}/messages", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    assert reply.json()["type"] == "error"
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and "private" in error["message"]

    items = [
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": private}],
        }
    ]
    reply = httpx.post(f"{local_server.api}/responses", json={"model": vision_model, "input": items}, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "input[0].content[1]" and "private" in error["message"]
