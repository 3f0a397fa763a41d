"""The asynchronous client (``AsyncClient`` / ``AsyncRESTfulClient``) against the session's real server: the same
calls as the synchronous one, awaited; a streamed call is awaited, then iterated."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL
from xinference.client import (
    AsyncClient,
    AsyncRESTfulChatModelHandle,
    AsyncRESTfulClient,
    AsyncRESTfulGenerateModelHandle,
    Client,
    ClientError,
)

T = TypeVar("T")
FRANCE = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]
GREEDY = {"max_tokens": 16, "temperature": 0}


def run(endpoint: str, body: Callable[[AsyncClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with AsyncRESTfulClient(endpoint) as client:
            return await body(client)

    return asyncio.run(main())


async def _text(chunks: AsyncIterator[dict[str, Any]]) -> str:
    return "".join([c["choices"][0]["delta"].get("content") or "" async for c in chunks])


def test_same_methods_as_the_sync_client() -> None:
    public = {n for n in dir(Client) if not n.startswith("_")} - {"close"}
    assert public <= {n for n in dir(AsyncClient) if not n.startswith("_")}
    for name in public:
        sync, asynchronous = getattr(Client, name), getattr(AsyncClient, name)
        if callable(sync):
            assert inspect.iscoroutinefunction(asynchronous), name
            assert list(inspect.signature(asynchronous).parameters) == list(inspect.signature(sync).parameters), name


def test_cluster_and_models(endpoint: str) -> None:
    async def body(client: AsyncClient) -> None:
        assert await client.status() == {"status": "ok"}
        assert (await client.get_workers_info())[0]["address"]
        assert (await client.get_supervisor_info())["supervisor_ip"]
        assert await client.login("user", "password") is None
        models = await client.list_models()
        assert models[DEFAULT_MODEL]["model_type"] == "LLM" and models[DEFAULT_MODEL]["context_length"] > 0
        assert (await client.describe_model(DEFAULT_MODEL))["model_engine"] == "llama.cpp"
        assert (await client.get_launch_model_progress(DEFAULT_MODEL))["progress"] == 1.0
        [instance] = await client.get_instance_info(DEFAULT_MODEL, DEFAULT_MODEL)
        assert instance["status"] == "READY"
        assert isinstance((await client.query_engine_by_model_name(DEFAULT_MODEL))["llama.cpp"], list)
        assert DEFAULT_MODEL in {r["model_name"] for r in await client.list_model_registrations("LLM")}
        assert (await client.get_model_registration("LLM", DEFAULT_MODEL))["model_name"] == DEFAULT_MODEL
        assert await client.list_cached_models(model_name="no-such-model") == []
        assert "xinference:requests_total" in await client.get_metrics()

    run(endpoint, body)


def test_chat_handle(endpoint: str) -> None:
    async def body(client: AsyncClient) -> tuple[Any, ...]:
        model = await client.get_model(DEFAULT_MODEL)
        assert isinstance(model, AsyncRESTfulChatModelHandle)
        whole = await model.chat(FRANCE, generate_config=GREEDY)
        streamed = await model.chat(FRANCE, generate_config={**GREEDY, "stream": True})
        assert isinstance(whole, dict) and not isinstance(streamed, dict)
        legacy = await model.chat(
            prompt=FRANCE[1]["content"], system_prompt=FRANCE[0]["content"], chat_history=[], generate_config=GREEDY
        )
        return whole, await _text(streamed), legacy

    whole, streamed, legacy = run(endpoint, body)
    assert "Paris" in whole["choices"][0]["message"]["content"]
    assert streamed == whole["choices"][0]["message"]["content"]
    assert legacy["choices"][0]["message"] == whole["choices"][0]["message"]


def test_generate_handle_and_calls_by_uid(endpoint: str) -> None:
    async def body(client: AsyncClient) -> None:
        model = await client.get_model(DEFAULT_MODEL)
        assert isinstance(model, AsyncRESTfulGenerateModelHandle)
        whole = await model.generate("The capital of France is", {"max_tokens": 6, "temperature": 0})
        assert isinstance(whole, dict) and whole["object"] == "text_completion"
        streamed = await model.generate("The capital of France is", {"max_tokens": 6, "temperature": 0, "stream": True})
        assert not isinstance(streamed, dict)
        assert "".join([c["choices"][0]["text"] async for c in streamed]) == whole["choices"][0]["text"]
        reply = await client.chat_completion(DEFAULT_MODEL, FRANCE, **GREEDY)
        assert (
            await _text(await client.chat_completion(DEFAULT_MODEL, FRANCE, stream=True, **GREEDY))
            == (reply["choices"][0]["message"]["content"])
        )
        text = await client.completions(DEFAULT_MODEL, "One, two,", max_tokens=4, temperature=0)
        assert text["choices"][0]["text"]

    run(endpoint, body)


def test_errors_carry_the_server_message(endpoint: str) -> None:
    async def body(client: AsyncClient) -> None:
        with pytest.raises(RuntimeError, match="no-such-model") as unknown:
            await client.get_model("no-such-model")
        assert isinstance(unknown.value, ClientError) and unknown.value.status_code == 404
        model = await client.get_model(DEFAULT_MODEL)
        assert isinstance(model, AsyncRESTfulChatModelHandle)
        for stream in (False, True):
            with pytest.raises(ClientError, match="temperature") as bad:
                await model.chat(FRANCE, generate_config={"temperature": 5, "stream": stream})
            assert bad.value.status_code == 400

    run(endpoint, body)


def test_stream_error_frame_raises_from_the_async_iterator() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        frames = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"error": {"message": "boom"}}\n\n'
        return httpx.Response(200, content=frames)

    async def main() -> list[Any]:
        seen: list[Any] = []
        async with AsyncClient("http://stand-in", transport=httpx.MockTransport(answer)) as client:
            with pytest.raises(ClientError, match="boom"):
                async for chunk in await client.chat_completion("m", FRANCE, stream=True):
                    seen.append(chunk)
        return seen

    assert asyncio.run(main()) == [{"choices": [{"delta": {"content": "a"}}]}]
