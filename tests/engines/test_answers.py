"""The embeddings and rerank answers every engine builds through :mod:`xinference.engines.answers`."""

from __future__ import annotations

import base64
import struct

from xinference.engines.answers import embeddings_answer, encode_embedding, rerank_answer, served_scores


def test_encode_embedding_floats_or_little_endian_float32() -> None:
    assert encode_embedding([0.5, -2.0], "float") == [0.5, -2.0]
    assert encode_embedding([0.5, -2.0], None) == [0.5, -2.0]
    packed = encode_embedding([0.5, -2.0], "base64")
    assert isinstance(packed, str)
    assert base64.b64decode(packed) == struct.pack("<2f", 0.5, -2.0)


def test_embeddings_answer_numbers_rows_and_defaults_total_tokens() -> None:
    answer = embeddings_answer([[1.0], "AACAPw=="], "uid", 5)
    assert answer == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": [1.0]},
            {"object": "embedding", "index": 1, "embedding": "AACAPw=="},
        ],
        "model": "uid",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    assert embeddings_answer([], "uid", 5, 9)["usage"] == {"prompt_tokens": 5, "total_tokens": 9}


def test_rerank_answer_best_first_ties_in_given_order_top_n_and_documents() -> None:
    scored = [(0, 0.2), (1, 0.9), (2, 0.2), (3, 0.5)]
    answer = rerank_answer(scored, ["a", "b", "c", "d"], 3, True, 17)
    assert [(row["index"], row["relevance_score"]) for row in answer["results"]] == [(1, 0.9), (3, 0.5), (0, 0.2)]
    assert answer["results"][0]["document"] == {"text": "b"}
    assert answer["meta"] == {
        "api_version": None,
        "billed_units": None,
        "tokens": {"input_tokens": 17, "output_tokens": 0},
        "warnings": None,
    }
    everything = rerank_answer(scored, ["a", "b", "c", "d"], None, False, 0)
    assert [row["index"] for row in everything["results"]] == [1, 3, 0, 2]
    assert all(row["document"] is None for row in everything["results"])
    assert everything["id"] != answer["id"]


def test_served_scores_reads_a_servers_results() -> None:
    served = {"results": [{"index": "2", "relevance_score": 1}, {"index": 0, "relevance_score": "0.5"}]}
    assert served_scores(served) == [(2, 1.0), (0, 0.5)]
    assert served_scores({}) == []
