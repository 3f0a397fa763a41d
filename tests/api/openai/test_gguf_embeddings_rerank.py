"""GGUF embedding and rerank models on the shared server: the real all-MiniLM-L6-v2 converted to GGUF and the
seeded tiny BERT cross-encoder (``tests/gguf_models.py``), registered as custom models with GGUF weights only, so
a launch that names no engine gets llama.cpp; answers checked against the same models elsewhere and against the
server's own OpenAPI schema, as a user's OpenAI client sees them."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tests.api.openapi_schema import assert_matches_openapi  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402
from tests.engines.test_llama_cpp_pooled import DOCUMENTS, QUERY, TEXTS, transformers_scores  # noqa: E402
from tests.gguf_models import gguf_family, minilm_folder  # noqa: E402

EMBEDDER = "minilm-gguf-api"
RERANKER = "tiny-reranker-gguf-api"


@pytest.fixture(scope="module")
def launched(local_server: LocalServer, minilm_gguf_path: Path, tiny_reranker_paths: tuple[Path, Path]):
    api = local_server.api
    models = ((EMBEDDER, "embedding", minilm_gguf_path), (RERANKER, "rerank", tiny_reranker_paths[1]))
    engines = {}
    try:
        for name, model_type, path in models:
            family = gguf_family(name, model_type, path)
            registered = httpx.post(f"{api}/model_registrations/{model_type}", json={"model": family}, timeout=30)
            assert registered.status_code == 200, registered.text
            reply = httpx.post(f"{api}/models", json={"model_name": name, "model_type": model_type}, timeout=120)
            assert reply.status_code == 200, reply.text
            engines[name] = reply.json()["model_engine"]
        yield engines
    finally:
        for name, model_type, _ in models:
            httpx.delete(f"{api}/models/{name}", timeout=60)
            httpx.delete(f"{api}/model_registrations/{model_type}/{name}", timeout=30)


def test_gguf_only_families_launch_on_llama_cpp(launched: dict[str, str], local_server: LocalServer) -> None:
    assert launched == {EMBEDDER: "llama.cpp", RERANKER: "llama.cpp"}
    table = httpx.get(f"{local_server.api}/engines/embedding/{EMBEDDER}", timeout=30).json()
    assert isinstance(table["llama.cpp"], list)
    assert table["sentence_transformers"] == "sentence_transformers only runs pytorch weights, not ggufv2"


def test_embeddings_through_the_openai_sdk(launched, local_server: LocalServer) -> None:
    openai = pytest.importorskip("openai")
    from sentence_transformers import SentenceTransformer

    client = openai.OpenAI(base_url=local_server.api, api_key="none")
    reply = client.embeddings.create(model=EMBEDDER, input=TEXTS)
    ours = np.array([item.embedding for item in reply.data])
    theirs = SentenceTransformer(str(minilm_folder()), device="cpu").encode(TEXTS)
    cosines = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(ours, theirs, strict=True)]
    assert min(cosines) > 0.99, cosines
    assert reply.model == EMBEDDER and reply.usage.prompt_tokens > len(TEXTS)
    packed = client.embeddings.create(model=EMBEDDER, input=TEXTS[0], encoding_format="base64")
    raw = base64.b64decode(str(packed.data[0].embedding))
    assert np.allclose(np.frombuffer(raw, dtype="<f4"), ours[0], atol=1e-4)


def test_embeddings_shape_and_errors(launched, local_server: LocalServer) -> None:
    body = httpx.post(f"{local_server.api}/embeddings", json={"model": EMBEDDER, "input": TEXTS[:2]}, timeout=60)
    assert body.status_code == 200, body.text
    assert_matches_openapi(local_server.endpoint, "post", "/v1/embeddings", body.json())
    wrong = httpx.post(
        f"{local_server.api}/embeddings", json={"model": EMBEDDER, "input": "x", "dimensions": 64}, timeout=60
    )
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "dimensions"
    chat = httpx.post(
        f"{local_server.api}/chat/completions",
        json={"model": EMBEDDER, "messages": [{"role": "user", "content": "hi"}]},
        timeout=60,
    )
    assert chat.status_code == 400, chat.text


def test_rerank_on_llama_cpp(launched, local_server: LocalServer, tiny_reranker_paths) -> None:
    reply = httpx.post(
        f"{local_server.api}/rerank",
        json={"model": RERANKER, "query": QUERY, "documents": DOCUMENTS, "top_n": 3, "return_documents": True},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert_matches_openapi(local_server.endpoint, "post", "/v1/rerank", body)
    expected, tokens = transformers_scores(tiny_reranker_paths[0], QUERY, DOCUMENTS)
    order = sorted(range(len(DOCUMENTS)), key=lambda i: expected[i], reverse=True)[:3]
    assert [row["index"] for row in body["results"]] == order
    for row in body["results"]:
        assert row["relevance_score"] == pytest.approx(expected[row["index"]], abs=0.01)  # see the engine's test
        assert row["document"] == {"text": DOCUMENTS[row["index"]]}
    assert body["meta"]["tokens"]["input_tokens"] == tokens
