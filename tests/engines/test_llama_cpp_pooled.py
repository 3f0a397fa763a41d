"""Embedding and rerank models on the llama.cpp adapter, in-process: the real all-MiniLM-L6-v2 converted to GGUF
against sentence-transformers on the same texts, and a seeded tiny BERT cross-encoder against transformers on the
same pairs (see ``tests/gguf_models.py`` for why its token-type rows are equal)."""

from __future__ import annotations

import asyncio
import base64
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from tests.gguf_models import gguf_family
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.errors import ContextLengthExceeded, InvalidRequest, LaunchFailed, WrongModelType
from xinference.hardware import detect_hardware
from xinference.model.spec import ModelFamily

TEXTS = [
    "A cat sits on the mat.",
    "A kitten is sitting on a rug.",
    "Quarterly tax filings are due in April.",
    "The quick brown fox jumps over the lazy dog, again and again, until it is tired.",
]
QUERY = "what do cats do?"
DOCUMENTS = ["Cats purr and sleep.", "Taxes are due in April.", "A cat chased a mouse.", "The market fell today."]


def family(model_type: str, path: Path) -> ModelFamily:
    return ModelFamily.model_validate(gguf_family(f"gguf-{model_type}", model_type, path))


def make_engine(model_type: str, path: Path, uid: str, **options: object) -> LlamaCppEngine:
    fam = family(model_type, path)
    return LlamaCppEngine(
        model_uid=uid,
        family=fam,
        spec=fam.model_specs[0],
        quantization="F16",
        model_path=str(path),
        config=LlamaCppEngine.parse_config(dict(options)),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def embedder(loop, minilm_gguf_path: Path):
    engine = make_engine("embedding", minilm_gguf_path, "gguf-minilm")
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


@pytest.fixture(scope="module")
def reranker(loop, tiny_reranker_paths: tuple[Path, Path]):
    engine = make_engine("rerank", tiny_reranker_paths[1], "gguf-reranker")
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


@pytest.fixture(scope="module")
def sentence_transformer():
    from sentence_transformers import SentenceTransformer

    from tests.gguf_models import minilm_folder

    return SentenceTransformer(str(minilm_folder()), device="cpu")


def test_embeddings_match_sentence_transformers(loop, embedder, sentence_transformer) -> None:
    reply = loop.run_until_complete(embedder.embed({"input": TEXTS}))
    ours = np.array([row["embedding"] for row in reply["data"]])
    theirs = sentence_transformer.encode(TEXTS)
    assert ours.shape == theirs.shape == (4, 384)
    cosines = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(ours, theirs, strict=True)]
    assert min(cosines) > 0.99, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-3)  # normalized, as MiniLM's own Normalize
    tokens = sum(len(ids) for ids in sentence_transformer.tokenizer(TEXTS)["input_ids"])
    assert reply["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    assert reply["model"] == "gguf-minilm" and [row["index"] for row in reply["data"]] == [0, 1, 2, 3]


def test_token_ids_base64_and_dimensions(loop, embedder, sentence_transformer) -> None:
    ids = sentence_transformer.tokenizer(TEXTS[0])["input_ids"]
    by_text = loop.run_until_complete(embedder.embed({"input": [TEXTS[0]]}))["data"][0]["embedding"]
    by_ids = loop.run_until_complete(embedder.embed({"input": [ids]}))["data"][0]["embedding"]
    assert np.allclose(by_text, by_ids, atol=1e-5)
    packed = loop.run_until_complete(embedder.embed({"input": [TEXTS[0]], "encoding_format": "base64"}))
    raw = base64.b64decode(packed["data"][0]["embedding"])
    assert np.allclose(struct.unpack(f"<{len(raw) // 4}f", raw), by_text, atol=1e-6)
    assert loop.run_until_complete(embedder.embed({"input": [TEXTS[0]], "dimensions": 384}))["data"]
    with pytest.raises(InvalidRequest, match="384-dimensional"):
        loop.run_until_complete(embedder.embed({"input": [TEXTS[0]], "dimensions": 128}))


def test_bad_inputs_are_the_callers_errors(loop, embedder) -> None:
    with pytest.raises(InvalidRequest, match="invalid tokens"):
        loop.run_until_complete(embedder.embed({"input": [[999999]]}))
    with pytest.raises(ContextLengthExceeded, match="longer than this model takes") as raised:
        loop.run_until_complete(embedder.embed({"input": ["word " * 700]}))
    assert raised.value.status_code == 400 and raised.value.param == "input"


def test_concurrent_requests_share_passes_and_keep_their_order(loop, embedder) -> None:
    alone = [loop.run_until_complete(embedder.embed({"input": [text]}))["data"][0]["embedding"] for text in TEXTS]

    async def together() -> list[dict]:
        return await asyncio.gather(*(embedder.embed({"input": [TEXTS[i % 4]]}) for i in range(16)))

    replies = loop.run_until_complete(together())
    for i, reply in enumerate(replies):
        # the same vector up to the rounding of another batch shape (f16 weights); other texts are far below
        assert float(np.dot(reply["data"][0]["embedding"], alone[i % 4])) > 0.9999


def test_unnormalized_vectors_keep_their_direction(loop, minilm_gguf_path: Path, embedder) -> None:
    raw = make_engine("embedding", minilm_gguf_path, "gguf-minilm-raw", normalize=False, n_parallel=2)
    loop.run_until_complete(raw.load())
    try:
        vector = np.array(loop.run_until_complete(raw.embed({"input": [TEXTS[2]]}))["data"][0]["embedding"])
    finally:
        loop.run_until_complete(raw.unload())
    unit = np.array(loop.run_until_complete(embedder.embed({"input": [TEXTS[2]]}))["data"][0]["embedding"])
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 0.1
    assert np.allclose(vector / np.linalg.norm(vector), unit, atol=1e-4)
    assert raw.resolved.n_parallel == 2 and raw.resolved.n_ubatch >= 512


def test_an_embedding_model_cannot_chat(loop, embedder) -> None:
    with pytest.raises(WrongModelType):
        loop.run_until_complete(embedder.chat({"messages": [{"role": "user", "content": "hi"}]}))
    with pytest.raises(WrongModelType):
        loop.run_until_complete(embedder.rerank({"query": "q", "documents": ["d"]}))


def transformers_scores(folder: Path, query: str, documents: list[str]) -> tuple[list[float], int]:
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    encoded = tokenizer([query] * len(documents), documents, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits[:, 0]
    tokens = int(encoded["attention_mask"].sum())
    return [1.0 / (1.0 + math.exp(-float(x))) for x in logits], tokens


def test_rerank_matches_transformers(loop, reranker, tiny_reranker_paths) -> None:
    expected, tokens = transformers_scores(tiny_reranker_paths[0], QUERY, DOCUMENTS)
    reply = loop.run_until_complete(reranker.rerank({"query": QUERY, "documents": DOCUMENTS}))
    order = sorted(range(len(DOCUMENTS)), key=lambda i: expected[i], reverse=True)
    assert [row["index"] for row in reply["results"]] == order
    for row in reply["results"]:
        # llama.cpp's GELU is not torch's exact one: the tiny model's wide weights carry that to ~0.02 in the logit
        assert row["relevance_score"] == pytest.approx(expected[row["index"]], abs=0.01)
        assert row["document"] is None
    assert max(expected) - min(expected) > 0.1  # the scores lie well apart: the order is the model's
    assert reply["meta"]["tokens"] == {"input_tokens": tokens, "output_tokens": 0}


def test_rerank_top_n_and_documents(loop, reranker) -> None:
    reply = loop.run_until_complete(
        reranker.rerank({"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "return_documents": True})
    )
    full = loop.run_until_complete(reranker.rerank({"query": QUERY, "documents": DOCUMENTS}))
    assert [row["index"] for row in reply["results"]] == [row["index"] for row in full["results"][:2]]
    assert [row["document"]["text"] for row in reply["results"]] == [DOCUMENTS[r["index"]] for r in reply["results"]]


def test_raw_logits_on_request(loop, tiny_reranker_paths) -> None:
    engine = make_engine("rerank", tiny_reranker_paths[1], "gguf-reranker-logits", score_activation="none")
    loop.run_until_complete(engine.load())
    try:
        reply = loop.run_until_complete(engine.rerank({"query": QUERY, "documents": DOCUMENTS}))
    finally:
        loop.run_until_complete(engine.unload())
    expected, _ = transformers_scores(tiny_reranker_paths[0], QUERY, DOCUMENTS)
    for row in reply["results"]:
        logit = math.log(expected[row["index"]] / (1 - expected[row["index"]]))
        assert row["relevance_score"] == pytest.approx(logit, abs=0.05)


def test_the_wrong_file_fails_the_launch_with_a_reason(loop, minilm_gguf_path, tiny_reranker_paths) -> None:
    as_reranker = make_engine("rerank", minilm_gguf_path, "gguf-not-a-reranker")
    with pytest.raises(LaunchFailed, match="no classification head"):
        loop.run_until_complete(as_reranker.load())
    loop.run_until_complete(as_reranker.unload())
    as_embedder = make_engine("embedding", tiny_reranker_paths[1], "gguf-not-an-embedder")
    with pytest.raises(LaunchFailed, match="reranker"):
        loop.run_until_complete(as_embedder.load())
    loop.run_until_complete(as_embedder.unload())
