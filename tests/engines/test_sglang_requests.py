"""What SGLang's adapter sends its server for chats with images, and how it counts their tokens.

SGLang has no CPU build and vLLM's CPU server (the stand-in of ``test_sglang.py``) cannot serve a vision model in
every environment, so the server here is a test double (``RecordingSGLangServer``, an ``httpx.MockTransport``)
that records each request and answers as SGLang's OpenAI routes do; everything on the adapter's side is real.
``test_sglang_images.py`` runs the same path against vLLM's server where it can load the tiny LLaVA.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.machines import linux
from tests.vision_models import VISION_CHAT_TEMPLATE, image_data_uri, vision_family
from xinference.engines.sglang.engine import SGLangEngine
from xinference.model.spec import ModelFamily

CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1, gpu_name="A100", vram=40, vram_free=39)
RED = image_data_uri()


class RecordingSGLangServer:
    """Test double of SGLang's server: records (path, body) and answers a chat with ``prompt_tokens`` and
    ``/tokenize`` with one token per character."""

    def __init__(self, prompt_tokens: int = 57) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.prompt_tokens = prompt_tokens

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append((request.url.path, body))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [0] * len(body["prompt"]), "count": len(body["prompt"])})
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": 1, "total_tokens": self.prompt_tokens + 1}
        choice = {"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "length"}
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage})


@pytest.fixture
def engine(tmp_path: Path) -> tuple[SGLangEngine, RecordingSGLangServer]:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": VISION_CHAT_TEMPLATE}))
    family = ModelFamily.model_validate(vision_family("tiny-vl", tmp_path))
    engine = SGLangEngine(
        model_uid="vl",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(tmp_path),
        config=SGLangEngine.parse_config({"limit_mm_data_per_request": {"image": 2}}),
        hardware=CUDA,
    )
    server = RecordingSGLangServer()
    engine._server = object()  # type: ignore[assignment]
    engine._client = httpx.AsyncClient(base_url="http://sglang.test", transport=httpx.MockTransport(server))
    return engine, server


def ask(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is in it?"}, *parts]}]


def test_image_parts_reach_the_server_as_sent(engine: tuple[SGLangEngine, RecordingSGLangServer]) -> None:
    adapter, server = engine
    part = {"type": "image_url", "image_url": {"url": RED, "detail": "low"}}
    asyncio.run(adapter.chat({"messages": ask(part), "max_tokens": 8}))
    (path, body), *_ = server.requests
    assert path == "/v1/chat/completions" and body["model"] == "vl"
    assert body["messages"][0]["content"][1] == part  # SGLang's OpenAI route reads image_url parts with data: URIs


def test_a_request_with_images_is_counted_by_the_server(engine: tuple[SGLangEngine, RecordingSGLangServer]) -> None:
    adapter, server = engine
    request = {"messages": ask({"type": "image_url", "image_url": {"url": RED}}), "stream": True, "max_tokens": 99}
    assert asyncio.run(adapter.count_tokens(request)) == 57
    (path, body), *_ = server.requests
    assert path == "/v1/chat/completions"
    assert body["max_tokens"] == 1 and body["stream"] is False and "stream_options" not in body
    assert body["messages"][0]["content"][1]["image_url"]["url"] == RED


def test_text_is_still_counted_by_tokenizing_the_rendered_prompt(
    engine: tuple[SGLangEngine, RecordingSGLangServer],
) -> None:
    adapter, server = engine
    counted = asyncio.run(adapter.count_tokens({"messages": [{"role": "user", "content": "hi"}]}))
    (path, body), *_ = server.requests
    assert path == "/tokenize" and body["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert counted == len(body["prompt"])


def test_the_image_limit_reaches_the_command_line(engine: tuple[SGLangEngine, RecordingSGLangServer]) -> None:
    adapter, _ = engine
    args = adapter.server_args(python="p", port=1, api_key="k")
    assert args[args.index("--limit-mm-data-per-request") + 1] == '{"image":2}'
