"""LlamaIndex's Xinference integrations, unchanged, against the session's real server.

``llama-index-llms-xinference`` imports ``xinference.client.RESTfulClient`` (this package), reads
``client.list_models()[uid]["context_length"]`` and calls the chat handle in Xinference's pre-1.0 form
(``chat(prompt=..., chat_history=..., generate_config=...)``); ``llama-index-embeddings-xinference`` posts to
``/v1/embeddings`` itself (requests and aiohttp).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer

pytest.importorskip("llama_index.llms.xinference")

from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.embeddings.xinference import XinferenceEmbedding  # noqa: E402
from llama_index.llms.xinference import Xinference  # noqa: E402

EMBEDDING_UID = "llamaindex-embedding"


@pytest.fixture(scope="module")
def llm(endpoint: str) -> Xinference:
    return Xinference(endpoint=endpoint, model_uid=DEFAULT_MODEL, temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def embedding_uid(local_server: LocalServer) -> Iterator[str]:
    body = {"model_name": "all-MiniLM-L6-v2", "model_type": "embedding", "model_uid": EMBEDDING_UID}
    response = httpx.post(f"{local_server.api}/models", json=body, timeout=120)
    assert response.status_code == 200, response.text
    yield EMBEDDING_UID
    httpx.delete(f"{local_server.api}/models/{EMBEDDING_UID}", timeout=60)


def test_llm_reads_the_model_description(llm: Xinference, endpoint: str) -> None:
    described = httpx.get(f"{endpoint}/v1/models/{DEFAULT_MODEL}").json()
    assert llm.context_window == described["context_length"] > 0
    assert llm.model_description["model_name"] == DEFAULT_MODEL
    assert llm.metadata.model_name == DEFAULT_MODEL and llm.metadata.num_output == 12


def test_llm_complete(llm: Xinference) -> None:
    response = llm.complete("What is the capital of France? Answer in one word.")
    assert "Paris" in response.text


def test_llm_chat_with_history(llm: Xinference) -> None:
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="You are a helpful assistant. Answer in one short sentence."),
        ChatMessage(role=MessageRole.USER, content="What is the capital of France?"),
    ]
    response = llm.chat(messages)
    assert response.message.role == MessageRole.ASSISTANT
    assert "Paris" in (response.message.content or "")


def test_llm_stream_chat_and_stream_complete(llm: Xinference) -> None:
    messages = [ChatMessage(role=MessageRole.USER, content="What is the capital of France?")]
    whole = llm.chat(messages).message.content
    chunks = list(llm.stream_chat(messages))
    assert len(chunks) > 1 and chunks[-1].message.content == whole
    assert "".join(c.delta or "" for c in chunks) == whole
    completed = list(llm.stream_complete("What is the capital of France?"))
    assert completed and completed[-1].text == llm.complete("What is the capital of France?").text


def test_llm_on_an_unknown_uid_fails_with_the_server_message(endpoint: str) -> None:
    with pytest.raises(RuntimeError, match="no-such-model"):
        Xinference(endpoint=endpoint, model_uid="no-such-model")


@pytest.mark.slow  # launches an embedding model
def test_embeddings(endpoint: str, embedding_uid: str) -> None:
    embedder = XinferenceEmbedding(model_uid=embedding_uid, base_url=endpoint)
    texts = ["The weather is lovely today.", "It is sunny and warm outside.", "He drove the truck to the depot."]
    vectors = np.array(embedder.get_text_embedding_batch(texts))
    assert vectors.shape == (3, 384)
    query = np.array(embedder.get_query_embedding("The weather is lovely today."))
    assert np.allclose(query, vectors[0], atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2
    single = np.array(embedder.get_text_embedding(texts[1]))
    assert np.allclose(single, vectors[1], atol=1e-4)
    asynchronous = np.array(asyncio.run(embedder.aget_text_embedding(texts[2])))
    assert np.allclose(asynchronous, vectors[2], atol=1e-4)
