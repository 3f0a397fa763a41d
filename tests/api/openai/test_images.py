"""The image routes through the openai SDK and plain HTTP on the shared server, with a tiny random Stable Diffusion
pipeline built at test time, registered as a custom image model and launched on diffusers: sizes, n, seeds, b64 and
url answers, edits, variations and inpainting, bad input as 4xx, progress, an abort mid-run, and the model serving
on after all of it."""

from __future__ import annotations

import base64
import io
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.openapi_schema import assert_matches_openapi
from tests.conftest import LocalServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_model(tiny_sd_uid: str) -> str:
    return tiny_sd_uid


@pytest.fixture(scope="module")
def client(local_server: LocalServer) -> Any:
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=local_server.api, api_key="none", max_retries=0)


def _image(data: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def _png_bytes(size: tuple[int, int], color: tuple[int, ...] = (200, 40, 40), mode: str = "RGB") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new(mode, size, color).save(out, format="PNG")
    return out.getvalue()


def test_generate_returns_images_of_the_requested_size_and_count(client: Any, tiny_model: str) -> None:
    result = client.images.generate(model=tiny_model, prompt="a red cat", size="96x64", n=3, response_format="b64_json")
    assert len(result.data) == 3
    for item in result.data:
        image = _image(base64.b64decode(item.b64_json))
        assert image.format == "PNG" and image.size == (96, 64)
    assert result.size == "96x64"


def test_the_same_seed_gives_the_same_bytes(client: Any, tiny_model: str) -> None:
    def draw(seed: int) -> list[str]:
        result = client.images.generate(
            model=tiny_model, prompt="a tree", size="64x64", n=2, response_format="b64_json", extra_body={"seed": seed}
        )
        assert result.model_extra["seed"] == seed
        return [item.b64_json for item in result.data]

    first = draw(11)
    assert draw(11) == first
    assert draw(12) != first
    assert first[0] != first[1]  # two images of one request differ


def test_url_answers_are_served_by_the_platform(client: Any, tiny_model: str, local_server: LocalServer) -> None:
    result = client.images.generate(
        model=tiny_model, prompt="a boat", size="64x96", response_format="url", extra_body={"output_format": "webp"}
    )
    url = result.data[0].url
    assert_matches_openapi(
        local_server.endpoint, "post", "/v1/images/generations", result.model_dump(exclude_none=True)
    )
    assert url.startswith(local_server.endpoint + "/v1/images/files/") and url.endswith(".webp")
    fetched = httpx.get(url, timeout=30)
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/webp"
    assert _image(fetched.content).size == (64, 96)
    missing = httpx.get(f"{local_server.api}/images/files/{'0' * 32}.png", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "image_not_found"
    bad = httpx.get(f"{local_server.api}/images/files/..%2Fserver.out", timeout=30)
    assert bad.status_code == 404


def test_edits_variations_and_inpainting(client: Any, tiny_model: str, local_server: LocalServer) -> None:
    source = _png_bytes((80, 64))
    edited = client.images.edit(
        model=tiny_model, image=("in.png", source, "image/png"), prompt="blue", response_format="b64_json"
    )
    assert _image(base64.b64decode(edited.data[0].b64_json)).size == (80, 64)  # the input's size
    # OpenAI's mask: transparent pixels are repainted
    mask = _png_bytes((80, 64), (0, 0, 0, 0), mode="RGBA")
    painted = client.images.edit(
        model=tiny_model,
        image=("in.png", source, "image/png"),
        mask=("mask.png", mask, "image/png"),
        prompt="a hole",
        size="64x64",
        n=2,
        response_format="b64_json",
    )
    assert [_image(base64.b64decode(d.b64_json)).size for d in painted.data] == [(64, 64), (64, 64)]
    varied = client.images.create_variation(
        model=tiny_model, image=("in.png", source, "image/png"), response_format="b64_json"
    )
    assert _image(base64.b64decode(varied.data[0].b64_json)).size == (80, 64)
    # Xinference's inpainting route: image and mask_image, extensions as a JSON kwargs field
    files = {"image": ("image", source, "application/octet-stream"), "mask_image": ("m", _png_bytes((80, 64)))}
    data = {"model": tiny_model, "prompt": "x", "response_format": "b64_json", "kwargs": '{"seed": 3}'}
    answer = httpx.post(f"{local_server.api}/images/inpainting", data=data, files=files, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["seed"] == 3
    assert_matches_openapi(local_server.endpoint, "post", "/v1/images/inpainting", answer.json())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"size": "huge"}, "size"),
        ({"size": "100x100"}, "size"),
        ({"size": "4096x4096"}, "size"),
        ({"n": 11}, "n"),
        ({"n": 0}, "n"),
        ({"prompt": "  "}, "prompt"),
        ({"response_format": "gif"}, "response_format"),
        ({"seed": -1}, "seed"),
        ({"num_inference_steps": 1000}, "num_inference_steps"),
        ({"kwargs": '{"bogus": 1}'}, "kwargs.bogus"),
        ({"kwargs": "not json"}, "kwargs"),
    ],
)
def test_bad_generation_input_is_a_400_naming_the_field(
    local_server: LocalServer, tiny_model: str, body: dict[str, Any], param: str
) -> None:
    request = {"model": tiny_model, "prompt": "a cat", **body}
    response = httpx.post(f"{local_server.api}/images/generations", json=request, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_bad_uploads_and_wrong_model_types(local_server: LocalServer, tiny_model: str, model_uid: str) -> None:
    api = local_server.api
    text = {"image": ("notes.txt", b"not an image at all", "text/plain")}
    response = httpx.post(f"{api}/images/edits", data={"model": tiny_model, "prompt": "x"}, files=text, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "image", response.text
    response = httpx.post(f"{api}/images/edits", data={"model": tiny_model, "prompt": "x"}, timeout=60)
    assert response.status_code == 400, response.text
    two = [("image", ("a.png", _png_bytes((64, 64)))), ("image", ("b.png", _png_bytes((64, 64))))]
    response = httpx.post(f"{api}/images/edits", data={"model": tiny_model}, files=two, timeout=60)
    assert response.status_code == 400 and "one input image" in response.json()["error"]["message"]
    image = {"image": ("a.png", _png_bytes((64, 64)))}
    response = httpx.post(f"{api}/images/inpainting", data={"model": tiny_model}, files=image, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "mask"
    # a chat model cannot draw, an image model cannot chat
    response = httpx.post(f"{api}/images/generations", json={"model": model_uid, "prompt": "a cat"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["code"] == "wrong_model_type"
    chat = {"model": tiny_model, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{api}/chat/completions", json=chat, timeout=60)
    assert response.status_code == 400, response.text
    response = httpx.post(f"{api}/images/generations", json={"model": "no-such-model", "prompt": "a"}, timeout=60)
    assert response.status_code == 404
    # and the model serves on
    ok = httpx.post(
        f"{api}/images/generations", json={"model": tiny_model, "prompt": "ok", "size": "64x64"}, timeout=60
    )
    assert ok.status_code == 200, ok.text


def test_progress_and_abort_mid_run(local_server: LocalServer, tiny_model: str) -> None:
    api = local_server.api
    body = {
        "model": tiny_model,
        "prompt": "a long one",
        "size": "128x128",
        "num_inference_steps": 200,
        "request_id": "img-abort-1",
        "response_format": "b64_json",
    }
    answers: list[httpx.Response] = []
    worker = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{api}/images/generations", json=body, timeout=300))
    )
    worker.start()
    progress = 0.0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and progress <= 0:
        response = httpx.get(f"{api}/requests/img-abort-1/progress", timeout=30)
        if response.status_code == 200:
            progress = response.json()["progress"]
        time.sleep(0.05)
    assert 0 < progress < 1
    aborted = httpx.post(f"{api}/models/{tiny_model}/requests/img-abort-1/abort", json={}, timeout=30)
    assert aborted.json() == {"msg": "DONE"}
    worker.join(60)
    assert answers and answers[0].status_code == 409, answers[0].text if answers else "no answer"
    assert answers[0].json()["error"]["code"] == "request_aborted"
    missing = httpx.get(f"{api}/requests/never-sent/progress", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "request_not_found"
    # the engine stopped between steps: the next request does not wait for 200 of them
    started = time.monotonic()
    after = {"model": tiny_model, "prompt": "next", "size": "64x64", "request_id": "img-after-1"}
    assert httpx.post(f"{api}/images/generations", json=after, timeout=120).status_code == 200
    quick = time.monotonic() - started
    assert httpx.get(f"{api}/requests/img-after-1/progress", timeout=30).json() == {"progress": 1.0}
    started = time.monotonic()
    whole = {**body, "request_id": "img-whole-1", "num_inference_steps": 20, "size": "64x64"}
    assert httpx.post(f"{api}/images/generations", json=whole, timeout=300).status_code == 200
    assert quick < time.monotonic() - started


def test_models_list_the_image_abilities(local_server: LocalServer, tiny_model: str) -> None:
    models = httpx.get(f"{local_server.api}/models", timeout=30).json()["data"]
    entry = next(m for m in models if m["id"] == tiny_model)
    assert entry["model_type"] == "image"
    assert {"text2image", "image2image", "inpainting"} <= set(entry["abilities"])


def test_xinference_image_json_registers_and_lists(local_server: LocalServer, tmp_path: Path) -> None:
    """Xinference's flat image JSON, as its docs write it, registers unchanged."""
    family = {
        "version": 2,
        "model_name": "my-sd-json",
        "model_family": "stable_diffusion",
        "model_ability": ["text2image", "image2image"],
        "model_uri": str(tmp_path),
        "controlnet": [],
        "default_model_config": {"torch_dtype": "float16"},
    }
    api = local_server.api
    response = httpx.post(f"{api}/model_registrations/image", json={"model": family}, timeout=30)
    assert response.status_code == 200, response.text
    try:
        names = [r["model_name"] for r in httpx.get(f"{api}/model_registrations/image", timeout=30).json()]
        assert "my-sd-json" in names and "FLUX.1-dev" in names
        got = httpx.get(f"{api}/model_registrations/image/my-sd-json", timeout=30).json()
        assert got["model_specs"][0]["model_format"] == "diffusers"
    finally:
        httpx.delete(f"{api}/model_registrations/image/my-sd-json", timeout=30)
