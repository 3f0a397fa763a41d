"""The platform as an MCP server, driven by the ``mcp`` SDK's own client: ``/mcp`` on the shared server (the bundled
chat model, all-MiniLM-L6-v2, the tiny local cross-encoder, piper and whisper) and ``xinference mcp`` over stdio
against the same server. Results are compared with the HTTP routes the tools mirror."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import AudioContent, CallToolResult, TextContent

from tests.audio_speech import MISHEARD, SENTENCE, heard
from tests.conftest import DEFAULT_MODEL, LocalServer

TOOLS = {"list_models", "chat", "embed", "rerank", "transcribe", "speak"}
EMBEDDING = "all-MiniLM-L6-v2"


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(url: str, name: str, arguments: dict[str, Any]) -> CallToolResult:
    async with Client(url) as client:
        return await client.call_tool(name, arguments)


@pytest.fixture(scope="module")
def embedding_uid(local_server: LocalServer) -> Iterator[str]:
    pytest.importorskip("sentence_transformers")
    response = httpx.post(
        f"{local_server.api}/models", json={"model_name": EMBEDDING, "model_type": "embedding"}, timeout=120
    )
    assert response.status_code == 200, response.text
    yield EMBEDDING
    httpx.delete(f"{local_server.api}/models/{EMBEDDING}", timeout=60)


def test_tools_are_listed_with_their_schemas(local_server: LocalServer) -> None:
    async def run() -> Any:
        async with Client(f"{local_server.endpoint}/mcp") as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in asyncio.run(run())}
    assert set(tools) == TOOLS
    chat = tools["chat"].input_schema
    assert chat["required"] == ["model"] and {"prompt", "messages", "max_tokens"} <= set(chat["properties"])
    assert tools["transcribe"].input_schema["required"] == ["model", "audio_base64"]
    assert tools["list_models"].annotations is not None and tools["list_models"].annotations.read_only_hint


def test_list_models_and_chat(local_server: LocalServer) -> None:
    url = f"{local_server.endpoint}/mcp"
    listed = asyncio.run(call(url, "list_models", {}))
    assert not listed.is_error
    models = {m["id"]: m for m in json.loads(text_of(listed))["models"]}
    assert models[DEFAULT_MODEL]["model_type"] == "LLM" and "chat" in models[DEFAULT_MODEL]["abilities"]
    assert listed.structured_content == {"models": list(models.values())}

    question = "What is the capital of France?"
    answered = asyncio.run(
        call(url, "chat", {"model": DEFAULT_MODEL, "prompt": question, "max_tokens": 12, "temperature": 0})
    )
    assert not answered.is_error, text_of(answered)
    direct = httpx.post(
        f"{local_server.api}/chat/completions",
        json={
            "model": DEFAULT_MODEL,
            "messages": [{"role": "user", "content": question}],
            "max_tokens": 12,
            "temperature": 0,
        },
        timeout=60,
    ).json()
    assert text_of(answered) == direct["choices"][0]["message"]["content"]  # greedy: the route's own answer
    structured = answered.structured_content or {}
    assert structured["content"] == text_of(answered) and structured["usage"]["completion_tokens"] <= 12

    conversation = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada!"},
        {"role": "user", "content": "What is my name? Answer with the name only."},
    ]
    remembered = asyncio.run(
        call(url, "chat", {"model": DEFAULT_MODEL, "messages": conversation, "max_tokens": 8, "temperature": 0})
    )
    assert "ada" in text_of(remembered).lower(), text_of(remembered)


def test_tool_errors_name_what_is_wrong(local_server: LocalServer) -> None:
    url = f"{local_server.endpoint}/mcp"
    missing = asyncio.run(call(url, "chat", {"model": "no-such-model", "prompt": "hi"}))
    assert missing.is_error and "no-such-model" in text_of(missing)
    wrong_type = asyncio.run(call(url, "embed", {"model": DEFAULT_MODEL, "input": "hi"}))
    assert wrong_type.is_error and "cannot serve embeddings" in text_of(wrong_type)
    both = asyncio.run(
        call(url, "chat", {"model": DEFAULT_MODEL, "prompt": "hi", "messages": [{"role": "user", "content": "x"}]})
    )
    assert both.is_error and "not both" in text_of(both)
    bad_audio = asyncio.run(call(url, "transcribe", {"model": DEFAULT_MODEL, "audio_base64": "%%%"}))
    assert bad_audio.is_error and "base64" in text_of(bad_audio)
    schema = asyncio.run(call(url, "chat", {"model": DEFAULT_MODEL, "prompt": "hi", "max_tokens": 0}))
    assert schema.is_error and "max_tokens" in text_of(schema)


def test_embed_matches_the_embeddings_route(local_server: LocalServer, embedding_uid: str) -> None:
    texts = ["The weather is lovely today.", "It is sunny and warm outside."]
    result = asyncio.run(call(f"{local_server.endpoint}/mcp", "embed", {"model": embedding_uid, "input": texts}))
    assert not result.is_error, text_of(result)
    body = result.structured_content or {}
    assert body["dimensions"] == 384 and len(body["embeddings"]) == 2 and body["usage"]["prompt_tokens"] > 0
    direct = httpx.post(f"{local_server.api}/embeddings", json={"model": embedding_uid, "input": texts}, timeout=60)
    expected = np.array([item["embedding"] for item in direct.json()["data"]])
    assert np.allclose(np.array(body["embeddings"]), expected, atol=1e-5)
    assert json.loads(text_of(result)) == body


def test_rerank_orders_documents(local_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("sentence_transformers")
    from tests.custom_models import build_tiny_cross_encoder, launched_reranker

    path = build_tiny_cross_encoder(tmp_path_factory.mktemp("mcp-ce") / "model")
    documents = ["The Eiffel Tower is in Paris.", "Bananas are rich in potassium.", "Tokyo Tower is in Japan."]
    query = "Where is the Eiffel Tower?"
    with launched_reranker(local_server, "mcp-tiny-cross-encoder", path):
        arguments = {"model": "mcp-tiny-cross-encoder", "query": query, "documents": documents, "top_n": 2}
        result = asyncio.run(call(f"{local_server.endpoint}/mcp", "rerank", arguments))
        direct = httpx.post(
            f"{local_server.api}/rerank",
            json={"model": "mcp-tiny-cross-encoder", "query": query, "documents": documents, "top_n": 2},
            timeout=60,
        ).json()
    assert not result.is_error, text_of(result)
    results = (result.structured_content or {})["results"]
    assert [r["index"] for r in results] == [r["index"] for r in direct["results"]]
    assert all(r["document"] == documents[r["index"]] for r in results)


@pytest.mark.slow
def test_speak_then_transcribe(local_server: LocalServer, piper_voice_uid: str, whisper_uid: str) -> None:
    url = f"{local_server.endpoint}/mcp"
    spoken = asyncio.run(call(url, "speak", {"model": piper_voice_uid, "text": SENTENCE, "speed": 0.87}))
    assert not spoken.is_error, spoken.content
    block = spoken.content[0]
    assert isinstance(block, AudioContent) and block.mime_type == "audio/wav"
    audio = base64.b64decode(block.data)
    assert audio[:4] == b"RIFF" and (spoken.structured_content or {})["bytes"] == len(audio)
    transcribed = asyncio.run(
        call(url, "transcribe", {"model": whisper_uid, "audio_base64": block.data, "filename": "speech.wav"})
    )
    assert not transcribed.is_error and heard(text_of(transcribed), MISHEARD), text_of(transcribed)
    wrong = asyncio.run(call(url, "speak", {"model": whisper_uid, "text": "hello"}))
    assert wrong.is_error and "text-to-speech" in text_of(wrong)


def test_stdio_command_serves_the_same_tools(local_server: LocalServer, embedding_uid: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "xinference.cli", "mcp", "-e", local_server.endpoint]
    )

    async def run() -> tuple[set[str], CallToolResult, CallToolResult, CallToolResult, CallToolResult]:
        async with Client(params) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            listed = await client.call_tool("list_models", {})
            chat = await client.call_tool("chat", {"model": DEFAULT_MODEL, "prompt": "Say OK.", "max_tokens": 4})
            embed = await client.call_tool("embed", {"model": embedding_uid, "input": "hello"})
            missing = await client.call_tool("chat", {"model": "no-such-model", "prompt": "hi"})
            return names, listed, chat, embed, missing

    names, listed, chat, embed, missing = asyncio.run(run())
    assert names == TOOLS
    assert DEFAULT_MODEL in {m["id"] for m in (listed.structured_content or {})["models"]}
    assert not chat.is_error and text_of(chat) and (chat.structured_content or {})["usage"]["completion_tokens"] <= 4
    assert not embed.is_error and (embed.structured_content or {})["dimensions"] == 384
    assert missing.is_error and "no-such-model" in text_of(missing)
