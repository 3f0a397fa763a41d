"""What reaches the engine when a chat request carries images, on each API (chat completions, Anthropic Messages,
Responses): every image an ``image_url`` part holding a ``data:`` URI, the URL ones fetched by the API.

The model side is a test double (``RecordingRoutes``: a route table with one vision model whose replica records
the parameters it is called with), because what these tests check is the API process's work and no engine on
main reads images yet; the services, translations and image step are the real code. The engines' own tests check
that the pixels then go through a vision tower.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_images import PNG, ImageServer
from xinference.api.anthropic.protocol import CountTokensRequest, MessagesRequest
from xinference.api.anthropic.serving import MessagesService
from xinference.api.gateway.routes import Route
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.api.openai.chat.serving import GenerationService
from xinference.api.openai.responses.protocol import ResponsesRequest
from xinference.api.openai.responses.serving import ResponsesService
from xinference.api.openai.responses.store import ResponseStore
from xinference.errors import InvalidRequest

INLINE = "data:image/png;base64," + base64.b64encode(PNG).decode()
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "a red square"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
}


class RecordingReplica:
    """Test double of a model actor: records each call's parameters and answers a fixed chat completion."""

    address = "double"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.ref = self

    async def chat(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(params)
        return ANSWER

    async def count_tokens(self, params: dict[str, Any]) -> int:
        self.calls.append(params)
        return 42


class RecordingRoutes:
    """Test double of ``RouteTable``: one model with the abilities given, served by a :class:`RecordingReplica`."""

    keepalive = None

    def __init__(self, abilities: list[str]) -> None:
        self.abilities = abilities
        self.replica = RecordingReplica()

    async def get(self, model: str) -> Route:
        return Route(model_uid=model, model_type="LLM", model_ability=self.abilities)

    async def call(self, route: Route, call: Any, ticket: Any = None) -> tuple[Any, RecordingReplica]:
        return await call(self.replica), self.replica


@pytest.fixture(scope="module")
def images() -> Iterator[ImageServer]:
    server = ImageServer()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def allow_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_IMAGE_URL_ALLOW_PRIVATE", "1")


def services(abilities: list[str]) -> tuple[RecordingRoutes, GenerationService]:
    routes = RecordingRoutes(abilities)
    return routes, GenerationService(routes)  # type: ignore[arg-type]


def image_urls(params: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in params["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def test_chat_completions_send_data_uris(images: ImageServer) -> None:
    routes, generation = services(["chat", "vision"])
    body = ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Compare"},
                        {"type": "image_url", "image_url": {"url": images.url("/cat.png"), "detail": "high"}},
                        {"type": "image_url", "image_url": {"url": INLINE}},
                    ],
                }
            ],
        }
    )
    asyncio.run(generation.create("chat", body))
    (params,) = routes.replica.calls
    assert image_urls(params) == [INLINE, INLINE]
    assert params["messages"][0]["content"][1]["image_url"]["detail"] == "high"


def test_chat_completions_refuse_images_to_a_model_without_vision(images: ImageServer) -> None:
    routes, generation = services(["chat"])
    body = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": INLINE}}]}]}
    )
    with pytest.raises(InvalidRequest) as caught:
        asyncio.run(generation.create("chat", body))
    assert "cannot read images" in caught.value.message
    assert caught.value.param == "messages[0].content[0].image_url"
    assert routes.replica.calls == []


def test_messages_image_blocks_reach_the_engine_as_image_url_parts(images: ImageServer) -> None:
    routes, generation = services(["chat", "vision", "tools"])
    service = MessagesService(generation, routes)  # type: ignore[arg-type]
    b64 = base64.b64encode(PNG).decode()
    body = {
        "model": "m",
        "max_tokens": 16,
        "system": "Describe pictures.",
        "messages": [
            {"role": "user", "content": "Look up the picture."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": images.url("/other.png")}},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "image", "source": {"type": "url", "url": images.url("/cat.png")}}],
                    },
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},
                ],
            },
        ],
    }
    message = asyncio.run(service.create(MessagesRequest.model_validate(body)))
    assert isinstance(message, dict) and message["content"] == [{"type": "text", "text": "a red square"}]
    (params,) = routes.replica.calls
    urls = image_urls(params)
    assert len(urls) == 3 and all(u.startswith("data:image/png;base64,") for u in urls)
    # the tool message (chat puts it first) holds the tool result's image; then the user's own two images
    assert urls[0] == INLINE and urls[2] == INLINE and urls[1] != INLINE

    asyncio.run(service.count_tokens(CountTokensRequest.model_validate({k: body[k] for k in ("model", "messages")})))
    assert image_urls(routes.replica.calls[1]) == urls


def test_messages_errors_name_the_block(images: ImageServer) -> None:
    routes, generation = services(["chat", "vision"])
    service = MessagesService(generation, routes)  # type: ignore[arg-type]
    content = [
        {"type": "text", "text": "two pictures"},
        {"type": "image", "source": {"type": "url", "url": images.url("/cat.png")}},
        {"type": "image", "source": {"type": "url", "url": images.url("/page.html")}},
    ]
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": content}]}
    with pytest.raises(InvalidRequest) as caught:
        asyncio.run(service.create(MessagesRequest.model_validate(body)))
    assert caught.value.param == "messages[0].content[2]" and "not an image" in caught.value.message
    assert routes.replica.calls == []


def test_responses_input_images_reach_the_engine_and_stay_inlined(images: ImageServer) -> None:
    routes, generation = services(["chat", "vision"])
    service = ResponsesService(generation, ResponseStore())  # type: ignore[arg-type]
    first = {
        "model": "m",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is it?"},
                    {"type": "input_image", "image_url": images.url("/cat.png"), "detail": "low"},
                ],
            }
        ],
    }
    response = asyncio.run(service.create(ResponsesRequest.model_validate(first)))
    assert isinstance(response, dict)
    assert image_urls(routes.replica.calls[0]) == [INLINE]
    assert routes.replica.calls[0]["messages"][0]["content"][1]["image_url"]["detail"] == "low"

    hits = images.hits["/cat.png"]
    follow_up = {
        "model": "m",
        "previous_response_id": response["id"],
        "input": [{"role": "user", "content": [{"type": "input_image", "image_url": images.url("/page.html")}]}],
    }
    with pytest.raises(InvalidRequest) as caught:
        asyncio.run(service.create(ResponsesRequest.model_validate(follow_up)))
    assert caught.value.param == "input[0].content[0]"  # the new image, not the stored one
    assert images.hits["/cat.png"] == hits  # the stored conversation holds the image itself, not its URL
