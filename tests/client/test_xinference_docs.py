"""Xinference's own documentation snippets for its Python client, run against this server as written there
(``doc/source/user_guide/client_api.rst`` and ``models/model_abilities/{chat,embed,rerank}.rst``): launch,
get_model, chat, stream, generate, embeddings, rerank. Only the model names (the bundled models here) and the token
budgets (a tiny model on CPU) differ.

They run on a server of their own, as a new user's would: a launch without a uid takes the model's name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LocalServer, start_local_server

pytestmark = pytest.mark.slow

RERANKER = "tiny-cross-encoder-docs"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(tmp_path_factory.mktemp("docs-home"))
    try:
        yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="module")
def reranker_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    from tests.custom_models import build_tiny_cross_encoder

    return build_tiny_cross_encoder(tmp_path_factory.mktemp("docs-ce") / "model")


def test_launch_get_model_chat(server: LocalServer) -> None:
    from xinference.client import Client

    client = Client(server.endpoint)
    model_uid = client.launch_model(
        model_name="smollm2-instruct",
        model_engine="llama.cpp",
        model_format="ggufv2",
        model_size_in_billions=0.135,
        quantization="Q4_1",
    )
    model = client.get_model(model_uid)

    messages = [{"role": "user", "content": "What is the largest animal?"}]
    reply = model.chat(messages, generate_config={"max_tokens": 16})

    assert model_uid == "smollm2-instruct"
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["content"]


def test_chat_stream_thinking_switch_and_generate(server: LocalServer) -> None:
    from xinference.client import RESTfulClient

    client = RESTfulClient(server.endpoint)
    model = client.get_model("smollm2-instruct")
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the largest animal?"},
    ]
    whole = model.chat(messages, generate_config={"max_tokens": 16, "temperature": 0.7})
    chunks = list(model.chat(messages, generate_config={"max_tokens": 16, "stream": True}))
    without_thinking = model.chat(
        [{"role": "user", "content": "What is the largest animal?"}],
        enable_thinking=False,
        generate_config={"max_tokens": 8},
    )
    explicit = model.chat(
        [{"role": "user", "content": "What is the largest animal?"}],
        generate_config={"chat_template_kwargs": {"enable_thinking": False}, "max_tokens": 8},
    )
    completion = model.generate(prompt="What is the largest animal?", generate_config={"max_tokens": 16})

    assert whole["choices"][0]["message"]["role"] == "assistant"
    assert chunks and "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert without_thinking["choices"][0]["message"]["content"] and explicit["choices"][0]["message"]["content"]
    assert completion["object"] == "text_completion" and completion["choices"][0]["finish_reason"] in ("stop", "length")


def test_embedding(server: LocalServer) -> None:
    from xinference.client import Client

    client = Client(server.endpoint)
    model_uid = client.launch_model(model_name="all-MiniLM-L6-v2", model_type="embedding")
    model = client.get_model(model_uid)

    input_text = "What is the capital of China?"
    result = model.create_embedding(input_text)

    assert result["object"] == "list" and result["model"] == model_uid
    assert len(result["data"]) == 1 and len(result["data"][0]["embedding"]) == 384
    assert result["usage"]["prompt_tokens"] > 0
    client.terminate_model(model_uid)


def test_rerank(server: LocalServer, reranker_path: Path) -> None:
    from xinference.client import Client

    client = Client(server.endpoint)
    family = {
        "model_name": RERANKER,
        "model_ability": ["rerank"],
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_01",
                "quantizations": ["none"],
                "model_uri": f"file://{reranker_path}",
            }
        ],
    }
    # Xinference's custom-model registration (the model JSON as text), of a reranker built for the test
    client.register_model(model_type="rerank", model=json.dumps(family), persist=False)
    model_uid = client.launch_model(model_name=RERANKER, model_type="rerank")
    model = client.get_model(model_uid)

    query = "A man is eating pasta."
    corpus = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A woman is playing violin.",
    ]
    result = model.rerank(corpus, query)

    scores = [r["relevance_score"] for r in result["results"]]
    assert sorted(r["index"] for r in result["results"]) == [0, 1, 2, 3, 4]
    assert scores == sorted(scores, reverse=True)
    top = model.rerank(corpus, query, top_n=2, return_documents=True)
    assert [r["index"] for r in top["results"]] == [r["index"] for r in result["results"][:2]]
    assert all(r["document"]["text"] == corpus[r["index"]] for r in top["results"])
    client.terminate_model(model_uid)
    client.unregister_model("rerank", RERANKER)
