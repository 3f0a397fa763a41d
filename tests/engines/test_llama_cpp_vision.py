"""Vision chat on llama.cpp (issue 22): a tiny GGUF language model and its projector, written at test time
(``tests/vision_gguf_models.py``), seen by llama.cpp's real ``mtmd`` code; in-process and through the platform."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.conftest import LocalServer
from tests.vision_gguf_models import IMAGE_TOKENS, tiny_vision_gguf, write_projector
from xinference.engines.base import chunk_dicts
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.vision import check_projector, image_messages, without_image_data
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.hardware import detect_hardware
from xinference.model.spec import ModelFamily

QUESTION = "What is in this picture?"


def png_uri(size: tuple[int, int] = (64, 48), color: tuple[int, int, int] = (200, 30, 30), kind: str = "PNG") -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=kind)
    return f"data:image/{kind.lower()};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def with_image(url: str, text: str = QUESTION) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]}
    ]


def text_only(text: str = QUESTION) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def vision_family(name: str, model: Path, projectors: list[str], abilities: tuple[str, ...] = ("chat", "vision")):
    return {
        "model_name": name,
        "model_ability": list(abilities),
        "context_length": 2048,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_003",
                "quantizations": ["F32"],
                "model_uri": f"file://{model}",
                "multimodal_projectors": projectors,
            }
        ],
    }


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(language model, projector) of the tiny vision model, written once for this module."""
    return tiny_vision_gguf(tmp_path_factory.mktemp("vision-gguf"))


# -- the projector's header and the request's image parts (no model loaded) ------------------------------------
def test_only_a_vision_projector_is_accepted(tiny_vl: tuple[Path, Path], tmp_path: Path) -> None:
    model, projector = tiny_vl
    assert check_projector(str(projector), "tiny-vl") == "mlp"
    with pytest.raises(LaunchFailed, match="tiny-vision-llama.F32.gguf is not a multimodal projector"):
        check_projector(str(model), "tiny-vl")
    junk = tmp_path / "mmproj.gguf"
    junk.write_bytes(b"not a gguf")
    with pytest.raises(LaunchFailed, match="not a readable GGUF file"):
        check_projector(str(junk), "tiny-vl")


def test_image_parts_reach_llama_cpp_as_image_url_data_uris() -> None:
    png, webp = png_uri(), png_uri(kind="WEBP")
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "compare"},
                {"type": "input_image", "image_url": png},  # the Responses spelling, sent to chat as it is
                {"type": "image_url", "image_url": {"url": webp, "detail": "low"}},
            ],
        },
    ]
    out = image_messages(messages, projector=True, model_uid="m")
    assert out[0] == messages[0] and out[1]["content"][0] == {"type": "text", "text": "compare"}
    assert out[1]["content"][1] == {"type": "image_url", "image_url": {"url": png}}  # PNG goes as it came
    converted = out[1]["content"][2]["image_url"]["url"]
    assert converted.startswith("data:image/png;base64,")  # stb_image cannot read WebP: re-encoded
    assert Image.open(io.BytesIO(base64.b64decode(converted.split(",", 1)[1]))).size == (64, 48)
    assert messages[1]["content"][2]["image_url"]["url"] == webp  # the caller's messages are left alone
    with pytest.raises(InvalidRequest, match="launched without a multimodal projector") as caught:
        image_messages(messages, projector=False, model_uid="m")
    assert caught.value.param == "messages[1].content[1].image_url"
    assert image_messages(text_only(), projector=False, model_uid="m") == text_only()
    # rendering the template in Python (reasoning families) sees where images are, never their bytes
    placed = without_image_data(out)
    assert placed[1]["content"][1] == {"type": "image_url", "image_url": {"url": ""}}
    assert placed[1]["content"][0] == out[1]["content"][0] and out[1]["content"][1]["image_url"]["url"] == png


def test_the_projector_is_chosen_by_the_launch_not_by_llama_cpp_params() -> None:
    for options in ({"mmproj.path": "/m/mmproj.gguf"}, {"mmproj": {"path": "/m/mmproj.gguf"}}):
        with pytest.raises(InvalidRequest, match="with the launch option 'multimodal_projector'"):
            LlamaCppEngine.parse_config(options)
    assert "projector" not in json.dumps(LlamaCppEngine.config_class.model_json_schema())  # not a form field


# -- in-process: the engine with llama.cpp's mtmd ------------------------------------------------------------------
def make_engine(model: Path, projector: Path | None, uid: str) -> LlamaCppEngine:
    family = ModelFamily.model_validate(vision_family(uid, model, [projector.name] if projector else []))
    return LlamaCppEngine(
        model_uid=uid,
        family=family,
        spec=family.model_specs[0],
        quantization="F32",
        model_path=str(model),
        config=LlamaCppEngine.parse_config(
            {"n_ctx": 1024, "n_parallel": 2, **({"projector": str(projector)} if projector else {})}
        ),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def seeing(loop: asyncio.AbstractEventLoop, tiny_vl: tuple[Path, Path]) -> Iterator[LlamaCppEngine]:
    engine = make_engine(*tiny_vl, "tiny-vl-engine")
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def greedy(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "max_tokens": 4, "temperature": 0, "top_k": 1, **extra}


def test_an_image_goes_through_the_vision_tower_and_is_counted(
    loop: asyncio.AbstractEventLoop, seeing: LlamaCppEngine
) -> None:
    assert seeing.resolved.vision == "mmproj-tiny-vision-llama-f32.gguf (mlp)"
    assert "projector" not in seeing.resolved.model_dump()  # no local path in the launch result
    plain = loop.run_until_complete(seeing.chat(greedy(text_only())))
    red = loop.run_until_complete(seeing.chat(greedy(with_image(png_uri()))))
    assert red["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + IMAGE_TOKENS
    assert red["model"] == "tiny-vl-engine" and red["choices"][0]["message"]["content"]
    # the pixels matter: other images give other embeddings, so (greedy, random weights) other answers
    answers = {
        loop.run_until_complete(seeing.chat(greedy(with_image(png_uri(color=color)), max_tokens=8)))["choices"][0][
            "message"
        ]["content"]
        for color in ((200, 30, 30), (20, 220, 40), (10, 10, 250), (255, 255, 255))
    }
    assert len(answers) > 1
    # count_tokens (Anthropic's and Responses' token counting) counts the image the same way
    counted = loop.run_until_complete(seeing.count_tokens(greedy(with_image(png_uri()))))
    assert counted == red["usage"]["prompt_tokens"]


def test_a_streamed_chat_with_an_image(loop: asyncio.AbstractEventLoop, seeing: LlamaCppEngine) -> None:
    async def collect() -> list[dict[str, Any]]:
        request = greedy(with_image(png_uri(kind="WEBP")), stream=True, stream_options={"include_usage": True})
        stream = await seeing.chat_stream(request)
        chunks: list[dict[str, Any]] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            chunks.extend(chunk_dicts(batch))
        return chunks

    chunks = loop.run_until_complete(collect())
    text = "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices"))
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert text and usage and usage[-1]["prompt_tokens"] > IMAGE_TOKENS


def test_a_model_without_its_projector_refuses_images(loop: asyncio.AbstractEventLoop, tiny_vl) -> None:
    blind = make_engine(tiny_vl[0], None, "tiny-vl-blind")
    loop.run_until_complete(blind.load())
    try:
        assert blind.resolved.vision == ""
        with pytest.raises(InvalidRequest, match="launched without a multimodal projector") as caught:
            loop.run_until_complete(blind.chat(greedy(with_image(png_uri()))))
        assert caught.value.param == "messages[0].content[1].image_url"
        assert loop.run_until_complete(blind.chat(greedy(text_only())))["choices"]  # text still works
    finally:
        loop.run_until_complete(blind.unload())


def test_a_projector_of_another_model_fails_the_launch(loop: asyncio.AbstractEventLoop, tiny_vl, tmp_path) -> None:
    other = write_projector(tmp_path / "mmproj-48-wide.gguf", n_embd_text=48)
    engine = make_engine(tiny_vl[0], other, "tiny-vl-mismatch")
    with pytest.raises(LaunchFailed, match="mmproj-48-wide.gguf .mlp. may not belong to this model"):
        loop.run_until_complete(engine.load())
    loop.run_until_complete(engine.unload())


# -- through the platform: registration, launch, the openai SDK --------------------------------------------------
@pytest.fixture(scope="module")
def registered(local_server: LocalServer, tiny_vl: tuple[Path, Path]) -> Iterator[str]:
    model, projector = tiny_vl
    families = {
        "tiny-vl": vision_family("tiny-vl", model, [projector.name]),
        "tiny-vl-missing-mmproj": vision_family("tiny-vl-missing-mmproj", model, ["mmproj-not-there.gguf"]),
    }
    for body in families.values():
        response = httpx.post(
            f"{local_server.api}/model_registrations/LLM", json={"model": json.dumps(body), "persist": False}
        )
        assert response.status_code == 200, response.text
    yield "tiny-vl"
    for name in families:
        httpx.delete(f"{local_server.api}/models/{name}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{name}", timeout=30)


@pytest.mark.slow
def test_a_vision_chat_through_the_platform(local_server: LocalServer, registered: str) -> None:
    from openai import OpenAI

    response = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": registered, "model_engine": "llama.cpp", "n_ctx": 1024, "n_parallel": 2},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    described = httpx.get(f"{local_server.api}/models/{registered}", timeout=30).json()
    assert "mmproj-tiny-vision-llama-f32.gguf (mlp)" in json.dumps(described)
    client = OpenAI(base_url=local_server.api, api_key="x")
    plain = client.chat.completions.create(model=registered, messages=text_only(), max_tokens=4, temperature=0)  # type: ignore[arg-type]
    seen = client.chat.completions.create(
        model=registered,
        messages=with_image(png_uri()),
        max_tokens=4,
        temperature=0,  # type: ignore[arg-type]
    )
    assert seen.choices[0].message.content and seen.model == registered
    assert seen.usage is not None and plain.usage is not None
    assert seen.usage.prompt_tokens == plain.usage.prompt_tokens + IMAGE_TOKENS
    # Anthropic's Messages API: an image block reaches the same vision tower, and count_tokens counts it
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_uri().split(",")[1]}}
    anthropic_body = {
        "model": registered,
        "max_tokens": 4,
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}, block]}],
    }
    counted = httpx.post(f"{local_server.api}/messages/count_tokens", json=anthropic_body, timeout=60)
    assert counted.status_code == 200, counted.text
    answered = httpx.post(f"{local_server.api}/messages", json=anthropic_body, timeout=60)
    assert answered.status_code == 200, answered.text
    assert answered.json()["usage"]["input_tokens"] == counted.json()["input_tokens"] > IMAGE_TOKENS
    # the launch lists the projectors a spec offers, as Xinference's engine query does
    engines = httpx.get(f"{local_server.api}/engines/{registered}", timeout=30).json()
    assert engines["llama.cpp"][0]["multimodal_projectors"] == ["mmproj-tiny-vision-llama-f32.gguf"]


@pytest.mark.slow
def test_an_image_to_a_model_without_vision_is_a_400(local_server: LocalServer, model_uid: str) -> None:
    from openai import BadRequestError, OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    with pytest.raises(BadRequestError) as caught:
        client.chat.completions.create(model=model_uid, messages=with_image(png_uri()), max_tokens=4)  # type: ignore[arg-type]
    # the API refuses it for the family's abilities; llama.cpp's adapter would too (no projector loaded)
    assert "cannot read images" in str(caught.value) or "cannot see images" in str(caught.value)


@pytest.mark.slow
def test_a_missing_projector_is_a_clear_launch_error(local_server: LocalServer, registered: str) -> None:
    response = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": "tiny-vl-missing-mmproj", "model_engine": "llama.cpp", "n_ctx": 512},
        timeout=120,
    )
    assert response.status_code >= 400
    assert "'mmproj-not-there.gguf' is not beside the weights" in response.json()["error"]["message"]
    # a projector the spec does not offer is refused before any process starts
    response = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": registered, "model_uid": "tiny-vl-2", "multimodal_projector": "mmproj-other.gguf"},
        timeout=60,
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "multimodal_projector"
