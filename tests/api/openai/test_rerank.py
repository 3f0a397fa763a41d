"""``POST /v1/rerank`` on the shared server. No reranker ships on PyPI, so the model is a tiny cross-encoder built
locally from MiniLM's first layers and registered as a custom rerank model; the assertions are about real
behaviour: results ordered by the model's own scores, top_n, documents returned or not, shapes and errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tests.api.openapi_schema import assert_matches_openapi  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402
from tests.custom_models import build_tiny_cross_encoder, launched_reranker  # noqa: E402

NAME = "tiny-cross-encoder-local"
QUERY = "Where is the Eiffel Tower?"
DOCS = [
    "The Eiffel Tower is in Paris.",
    "Bananas are rich in potassium.",
    "Paris is the capital of France.",
    "The stock market closed higher.",
    "Tokyo Tower is in Japan.",
]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "model")


@pytest.fixture(scope="module")
def rerank_uid(local_server: LocalServer, model_path):
    with launched_reranker(local_server, NAME, model_path) as launched:
        assert launched["model_engine"] == "sentence_transformers"
        yield NAME


@pytest.fixture(scope="module")
def expected_scores(model_path):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(model_path), device="cpu", max_length=128).predict([(QUERY, d) for d in DOCS])


def rerank(server: LocalServer, body: dict) -> httpx.Response:
    return httpx.post(f"{server.api}/rerank", json=body, timeout=60)


def test_tiny_local_cross_encoder_orders_by_its_scores(local_server, rerank_uid, expected_scores) -> None:
    response = rerank(local_server, {"model": rerank_uid, "query": QUERY, "documents": DOCS, "return_documents": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"id", "results", "meta"} and body["id"]
    assert_matches_openapi(local_server.endpoint, "post", "/v1/rerank", body)
    order = [r["index"] for r in body["results"]]
    assert order == sorted(range(len(DOCS)), key=lambda i: -expected_scores[i])
    scores = [r["relevance_score"] for r in body["results"]]
    assert np.allclose(scores, [expected_scores[i] for i in order], atol=1e-4)
    assert all(r["document"] == {"text": DOCS[r["index"]]} for r in body["results"])
    tokens = body["meta"]["tokens"]
    assert tokens["input_tokens"] > 30 and tokens["output_tokens"] == 0


def test_tiny_local_cross_encoder_top_n_and_document_objects(local_server, rerank_uid, expected_scores) -> None:
    documents = [{"text": d} for d in DOCS]  # Cohere's object form
    body = rerank(local_server, {"model": rerank_uid, "query": QUERY, "documents": documents, "top_n": 2}).json()
    best = sorted(range(len(DOCS)), key=lambda i: -expected_scores[i])[:2]
    assert [r["index"] for r in body["results"]] == best
    assert all(r["document"] is None for r in body["results"])


def test_tiny_local_cross_encoder_concurrent_requests(local_server, rerank_uid, expected_scores) -> None:
    with ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(
                lambda _: rerank(local_server, {"model": rerank_uid, "query": QUERY, "documents": DOCS, "top_n": 1}),
                range(8),
            )
        )
    best = int(np.argmax(expected_scores))
    assert all(r.status_code == 200 and r.json()["results"][0]["index"] == best for r in replies)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"query": QUERY, "documents": []}, "documents"),
        ({"query": "", "documents": DOCS}, "query"),
        ({"query": QUERY, "documents": DOCS, "top_n": 0}, "top_n"),
        ({"documents": DOCS}, "query"),
    ],
)
def test_bad_rerank_requests_are_400(local_server, rerank_uid, body: dict, param: str) -> None:
    response = rerank(local_server, {"model": rerank_uid, **body})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_rerank_on_chat_model_is_400_naming_both(local_server, model_uid: str) -> None:
    response = rerank(local_server, {"model": model_uid, "query": QUERY, "documents": DOCS})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert model_uid in message and "LLM" in message and "rerank" in message


def test_chat_on_rerank_model_is_400(local_server, rerank_uid) -> None:
    response = httpx.post(
        f"{local_server.api}/chat/completions",
        timeout=30,
        json={"model": rerank_uid, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 400 and "rerank" in response.json()["error"]["message"]


def test_tiny_local_cross_encoder_through_the_platform_client(local_server, rerank_uid, expected_scores) -> None:
    from xinference.client import Client

    with Client(local_server.endpoint) as client:
        body = client.rerank(rerank_uid, QUERY, DOCS, top_n=2, return_documents=True)
    best = sorted(range(len(DOCS)), key=lambda i: -expected_scores[i])[:2]
    assert [r["index"] for r in body["results"]] == best
    assert body["results"][0]["document"]["text"] == DOCS[best[0]]
