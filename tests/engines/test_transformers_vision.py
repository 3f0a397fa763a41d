"""Vision chat on the Transformers engine with a tiny random LLaVA built at test time (``tests/vision_models.py``).

In-process: an image's pixels reach the vision tower (two pictures, two different answers' logits), its tokens
are counted in ``usage.prompt_tokens``, streams and plain calls work, image requests and text requests share the
continuous batch, bad images and too many images are 400s naming the part, and ``count_tokens`` counts what chat
prefills. Through the shared server: the openai SDK with an image as a ``data:`` URI, two concurrent image
requests, and a text-only request on the same model.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("transformers")

from tests.conftest import LocalServer  # noqa: E402
from tests.vision_models import (  # noqa: E402
    IMAGE_TOKENS,
    build_tiny_llava,
    image_data_uri,
    launched_vision_model,
    vision_family,
)
from xinference.engines.transformers.engine import TransformersEngine  # noqa: E402
from xinference.errors import InvalidRequest  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

RED = image_data_uri(colour=(220, 20, 20))
BLUE = image_data_uri(width=80, height=30, colour=(10, 20, 230))
QUESTION = "What is in this image?"


def with_image(url: str, text: str = QUESTION) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]}
    ]


def text_only(text: str = QUESTION) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make_engine(folder: Path, uid: str, abilities: list[str], **options: Any) -> TransformersEngine:
    family = ModelFamily.model_validate({**vision_family(uid, folder), "model_ability": abilities})
    return TransformersEngine(
        model_uid=uid,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(folder),
        config=TransformersEngine.parse_config({"max_num_seqs": 4, "max_model_len": 512, **options}),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def engine(loop, folder):
    engine = make_engine(folder, "unit-tf-vision", ["chat", "vision"], max_images_per_prompt=2)
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def chat(loop, engine, messages, **params) -> dict[str, Any]:
    return loop.run_until_complete(engine.chat({"messages": messages, **params}))


def test_loaded_as_image_text_to_text_with_its_processor(engine) -> None:
    assert type(engine._processor).__name__ == "LlavaProcessor"
    assert type(engine._ready().model).__name__ == "LlavaForConditionalGeneration"


def test_image_tokens_are_counted(loop, engine) -> None:
    with_picture = chat(loop, engine, with_image(RED), temperature=0, max_tokens=4)
    without = chat(loop, engine, text_only(), temperature=0, max_tokens=4)
    # the template writes "<image>\n" (2 tokens); the processor makes the one <image> into IMAGE_TOKENS
    grown = with_picture["usage"]["prompt_tokens"] - without["usage"]["prompt_tokens"]
    assert grown == IMAGE_TOKENS + 1
    assert with_picture["usage"]["completion_tokens"] == 4 and with_picture["choices"][0]["finish_reason"] in (
        "length",
        "stop",
    )


def test_pixels_reach_the_vision_tower(loop, engine) -> None:
    """Greedy answers with the model's log-probabilities: a different picture moves them (the only input that
    differs is the pixels, which only the vision tower reads); the same picture gives the same answer."""

    def first_logprobs(url: str) -> list[tuple[str, float]]:
        reply = chat(loop, engine, with_image(url), temperature=0, max_tokens=3, logprobs=True, top_logprobs=3)
        return [(e["token"], round(e["logprob"], 4)) for e in reply["choices"][0]["logprobs"]["content"]]

    red, blue, red_again = first_logprobs(RED), first_logprobs(BLUE), first_logprobs(RED)
    assert red == red_again
    assert red != blue


def test_streamed_image_chat(loop, engine) -> None:
    async def scenario() -> list[dict[str, Any]]:
        stream = await engine.chat_stream(
            {
                "messages": with_image(BLUE),
                "max_tokens": 5,
                "temperature": 0,
                "stream_options": {"include_usage": True},
            }
        )
        chunks: list[dict[str, Any]] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            chunks.extend(batch)
        return chunks

    chunks = loop.run_until_complete(scenario())
    plain = chat(loop, engine, with_image(BLUE), temperature=0, max_tokens=5)
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert streamed == plain["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]


def test_image_and_text_requests_share_the_batch(loop, engine) -> None:
    """Two image requests and a text request at once: each gets what it gets alone (greedy), and the scheduler
    ran them together."""
    alone = [
        chat(loop, engine, with_image(RED), temperature=0, max_tokens=12, ignore_eos=True),
        chat(loop, engine, with_image(BLUE), temperature=0, max_tokens=12, ignore_eos=True),
        chat(loop, engine, text_only("Hello, how are you?"), temperature=0, max_tokens=12, ignore_eos=True),
    ]
    before = engine.stats()["max_batch_seen"]

    async def together() -> list[dict[str, Any]]:
        return list(
            await asyncio.gather(
                engine.chat({"messages": with_image(RED), "temperature": 0, "max_tokens": 12, "ignore_eos": True}),
                engine.chat({"messages": with_image(BLUE), "temperature": 0, "max_tokens": 12, "ignore_eos": True}),
                engine.chat(
                    {
                        "messages": text_only("Hello, how are you?"),
                        "temperature": 0,
                        "max_tokens": 12,
                        "ignore_eos": True,
                    }
                ),
            )
        )

    replies = loop.run_until_complete(together())
    for single, batched in zip(alone, replies, strict=True):
        assert batched["choices"][0]["message"]["content"] == single["choices"][0]["message"]["content"]
        assert batched["usage"] == single["usage"]
    assert max(before, engine.stats()["max_batch_seen"]) >= 2


def test_count_tokens_counts_the_image(loop, engine) -> None:
    request = {"messages": with_image(RED), "max_tokens": 1}
    counted = loop.run_until_complete(engine.count_tokens(request))
    assert counted == chat(loop, engine, with_image(RED), max_tokens=1)["usage"]["prompt_tokens"]
    assert counted - loop.run_until_complete(engine.count_tokens({"messages": text_only()})) == IMAGE_TOKENS + 1


def test_bad_images_are_400s_naming_the_part(loop, engine) -> None:
    not_png = "data:image/png;base64," + base64.b64encode(b"not an image at all").decode()
    with pytest.raises(InvalidRequest) as caught:
        chat(loop, engine, with_image(not_png), max_tokens=2)
    assert caught.value.param == "messages[0].content[0].image_url"
    with pytest.raises(InvalidRequest, match="base64"):
        chat(loop, engine, with_image("data:image/png,plain"), max_tokens=2)
    three = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": RED}} for _ in range(3)]
            + [{"type": "text", "text": QUESTION}],
        }
    ]
    with pytest.raises(InvalidRequest, match="at most 2") as caught:
        chat(loop, engine, three, max_tokens=2)
    assert caught.value.param == "messages[0].content[2].image_url"


def test_model_without_vision_refuses_images(loop, folder) -> None:
    blind = make_engine(folder, "unit-tf-blind", ["chat"])
    with pytest.raises(InvalidRequest, match="cannot read images") as caught:
        # checked before the model is needed: the request names the image part
        loop.run_until_complete(blind._encode_media("chat", {"messages": with_image(RED)}))
    assert caught.value.param == "messages[0].content[0].image_url"


# -- through the server -----------------------------------------------------------------------------------------


def test_served_vision_model_with_the_openai_sdk(local_server: LocalServer, folder: Path) -> None:
    from openai import OpenAI

    name = "tiny-llava-tf"
    with launched_vision_model(local_server, name, folder, model_engine="Transformers", max_num_seqs=4) as launched:
        assert launched["model_engine"] == "Transformers"
        client = OpenAI(base_url=local_server.api, api_key="x")

        def ask(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model=name, messages=messages, temperature=0, max_tokens=6)  # type: ignore[arg-type]

        seen = ask(with_image(RED))
        blind = ask(text_only())
        assert seen.usage is not None and blind.usage is not None
        assert seen.choices[0].message.content is not None and blind.choices[0].message.content is not None
        assert seen.usage.prompt_tokens - blind.usage.prompt_tokens == IMAGE_TOKENS + 1
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            both = list(pool.map(ask, [with_image(RED), with_image(BLUE)]))
        assert both[0].choices[0].message.content == seen.choices[0].message.content  # greedy, same picture
        assert all(r.usage is not None and r.usage.prompt_tokens == seen.usage.prompt_tokens for r in both)
        stream = client.chat.completions.create(
            model=name,
            messages=with_image(BLUE),  # type: ignore[arg-type]
            temperature=0,
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == both[1].choices[0].message.content
        # Anthropic's image block reaches the same engine as the same image_url part: the same prompt, counted
        # alike by the answer and by count_tokens
        block = {
            "model": name,
            "max_tokens": 2,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": RED.split(",", 1)[1]},
                        },
                        {"type": "text", "text": QUESTION},
                    ],
                }
            ],
        }
        message = httpx.post(f"{local_server.api}/messages", json=block, timeout=60)
        assert message.status_code == 200, message.text
        assert message.json()["usage"]["input_tokens"] == seen.usage.prompt_tokens
        counted = httpx.post(f"{local_server.api}/messages/count_tokens", json=block, timeout=60)
        assert counted.status_code == 200, counted.text
        assert counted.json()["input_tokens"] == seen.usage.prompt_tokens
        bad = httpx.post(
            f"{local_server.api}/chat/completions",
            json={"model": name, "messages": with_image("data:image/png;base64,AAAA"), "max_tokens": 2},
            timeout=30,
        )
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["param"] == "messages[0].content[0].image_url"


def test_a_vision_model_without_a_processor_fails_its_launch(loop, folder, tmp_path) -> None:
    """The weights and the tokenizer without the image processor's files: the launch says what is missing instead
    of serving a model that cannot see."""
    import shutil

    from xinference.errors import LaunchFailed

    bare = tmp_path / "no-processor"
    shutil.copytree(folder, bare)
    for name in ("processor_config.json", "preprocessor_config.json"):
        (bare / name).unlink()
    engine = make_engine(bare, "unit-tf-no-processor", ["chat", "vision"])
    with pytest.raises(LaunchFailed, match="needs its processor files beside the weights"):
        loop.run_until_complete(engine.load())
    loop.run_until_complete(engine.unload())
