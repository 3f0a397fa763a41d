"""Vision chat on the MLX engine in-process: the tiny random LLaVA of ``tests/vision_models.py`` loaded by mlx-vlm
on this CPU (``mlx[cpu]``).

The folder Transformers 5 writes names the CLIP tower's weights without the ``vision_model.`` level that LLaVA
repositories on the hub have and that mlx-vlm's loader expects; the fixture converts it to the hub's layout
(:func:`tests.engines.vision_weights.hub_layout`), which is what a user's download looks like.

Needs mlx-vlm importable, i.e. the MLX env's Python (``test_mlx.py::test_vision_suite_in_the_env`` runs this file
with it); skipped elsewhere. Checks: an image's pixels reach the vision tower (two pictures, two different
continuations; the same picture twice, the same one), ``usage.prompt_tokens`` grows by exactly the image's tokens,
streaming, a text request on the same model, ``count_tokens``, and the 400s (too many images, a bad image).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("mlx_vlm") is None:  # not imported here: mlx must load after OpenBLAS
    pytest.skip("mlx-vlm is not importable here (run with the MLX env's Python)", allow_module_level=True)

from tests.engines.vision_weights import hub_layout  # noqa: E402
from tests.vision_models import IMAGE_TOKENS, build_tiny_llava, image_data_uri, vision_family  # noqa: E402
from xinference.engines.mlx.engine import MLXEngine  # noqa: E402
from xinference.errors import InvalidRequest, RequestTooLarge  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

pytestmark = pytest.mark.slow

RED = image_data_uri(colour=(220, 20, 20))
BLUE = image_data_uri(width=80, height=30, colour=(10, 20, 230))
QUESTION = "What is in this image?"
#: the template writes "<image>\n" for an image part: the image's tokens, then the newline's one token
IMAGE_PART_TOKENS = IMAGE_TOKENS + 1


def with_images(*urls: str, text: str = QUESTION) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


def text_only(text: str = QUESTION) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return hub_layout(build_tiny_llava(tmp_path_factory.mktemp("tiny-llava-mlx")))


@pytest.fixture(scope="module")
def loop():  # type: ignore[no-untyped-def]
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(loop, folder: Path):  # type: ignore[no-untyped-def]
    family = ModelFamily.model_validate(vision_family("unit-mlx-vision", folder))
    engine = MLXEngine(
        model_uid="unit-mlx-vision",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(folder),
        config=MLXEngine.parse_config({"max_model_len": 512, "max_images_per_prompt": 2}),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def chat(loop, engine, messages, **params):  # type: ignore[no-untyped-def]
    return loop.run_until_complete(engine.chat({"messages": messages, "temperature": 0, "max_tokens": 6, **params}))


def test_a_vision_family_loads_with_mlx_vlm(engine) -> None:  # type: ignore[no-untyped-def]
    import mlx_vlm  # noqa: F401

    assert type(engine._scheduler.model).__module__.startswith("mlx_vlm.models.llava")
    assert engine.stats()["mode"] == "vision"


def test_the_image_reaches_the_vision_tower_and_its_tokens_are_counted(loop, engine) -> None:  # type: ignore[no-untyped-def]
    red = chat(loop, engine, with_images(RED), logprobs=True)
    red_again = chat(loop, engine, with_images(RED), logprobs=True)
    blue = chat(loop, engine, with_images(BLUE), logprobs=True)
    plain = chat(loop, engine, text_only())
    first = [entry["logprob"] for entry in red["choices"][0]["logprobs"]["content"]]
    assert first == [entry["logprob"] for entry in red_again["choices"][0]["logprobs"]["content"]]
    assert first != [entry["logprob"] for entry in blue["choices"][0]["logprobs"]["content"]]  # the pixels count
    assert red["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + IMAGE_PART_TOKENS
    assert blue["usage"]["prompt_tokens"] == red["usage"]["prompt_tokens"]  # every image is resized to 56x56
    assert red["usage"]["completion_tokens"] == 6 and red["model"] == "unit-mlx-vision"
    two = chat(loop, engine, with_images(RED, BLUE))
    assert two["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + 2 * IMAGE_PART_TOKENS


def test_count_tokens_counts_the_image(loop, engine) -> None:  # type: ignore[no-untyped-def]
    reply = chat(loop, engine, with_images(RED))
    counted = loop.run_until_complete(engine.count_tokens({"messages": with_images(RED)}))
    assert counted == reply["usage"]["prompt_tokens"]


def test_streaming_with_an_image(loop, engine) -> None:  # type: ignore[no-untyped-def]
    async def collect() -> list[dict[str, Any]]:
        stream = await engine.chat_stream(
            {
                "messages": with_images(BLUE),
                "temperature": 0,
                "max_tokens": 6,
                "stream_options": {"include_usage": True},
            }
        )
        chunks: list[dict[str, Any]] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            chunks.extend(batch)
        return chunks

    chunks = loop.run_until_complete(collect())
    whole = chat(loop, engine, with_images(BLUE))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["prompt_tokens"] == whole["usage"]["prompt_tokens"]


def test_bad_images_and_too_many_are_400s_naming_the_part(loop, engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest) as many:
        chat(loop, engine, with_images(RED, RED, RED))
    assert many.value.param == "messages[0].content[2].image_url" and "at most 2" in str(many.value)
    with pytest.raises(InvalidRequest) as broken:
        chat(loop, engine, with_images("data:image/png;base64,aGVsbG8="))
    assert broken.value.param == "messages[0].content[0].image_url"
    assert not isinstance(broken.value, RequestTooLarge)
