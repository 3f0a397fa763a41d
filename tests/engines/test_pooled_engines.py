"""Embedding and rerank models on llama.cpp and vLLM without weights: pooling choice, launch options, answers in
the platform's shapes, vLLM's command line, the engine order and the matcher's reasons."""

from __future__ import annotations

import base64
import math
import struct

import pytest

from tests.machines import linux
from xinference.engines.answers import served_embeddings_answer
from xinference.engines.llama_cpp.config import DEFAULT_POOLED_BATCH, DEFAULT_POOLED_SLOTS, LlamaCppConfig
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.pooling import (
    choose_pooling,
    embed_body,
    rerank_body,
    rerank_response,
)
from xinference.engines.managed import pooling as managed
from xinference.engines.matcher import choose_engine
from xinference.engines.registry import ENGINE_ORDER, engine_order
from xinference.engines.vllm.config import pooling_args
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import EngineRejected, InvalidRequest, LaunchFailed
from xinference.model.gguf_info import GgufInfo
from xinference.model.registry import SpecChoice
from xinference.model.spec import ModelFamily

CPU = linux()
CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1)
INSTALLED = {name: "" for name in ENGINE_ORDER}


def info(pooling: int | None = 1, classifier: bool = False, context: int = 512) -> GgufInfo:
    return GgufInfo(
        architecture="bert",
        n_params=1,
        weight_bytes=1,
        block_count=6,
        layer_bytes=1,
        other_bytes=1,
        n_embd=384,
        n_head=12,
        n_head_kv=12,
        key_length=32,
        value_length=32,
        tokenizer_model="bert",
        tokens=(),
        bos_token_id=101,
        eos_token_id=None,
        pooling_type=pooling,
        context_length=context,
        has_classifier=classifier,
    )


def family(model_type: str, *formats: str) -> ModelFamily:
    specs = []
    for fmt in formats:
        spec = {"model_format": fmt, "model_size_in_billions": "0_022", "model_uri": "file:///w"}
        spec["quantizations"] = ["F16"] if fmt == "ggufv2" else ["none"]
        specs.append(spec)
    return ModelFamily.model_validate(
        {
            "model_name": f"emb-{model_type}",
            "model_type": model_type,
            "model_ability": ["embed" if model_type == "embedding" else "rerank"],
            "model_specs": specs,
        }
    )


def choices(fam: ModelFamily) -> list[SpecChoice]:
    return [SpecChoice(fam, spec, spec.quantizations[0]) for spec in fam.model_specs]


# -- llama.cpp: which pooling -------------------------------------------------------------------------------------
def test_pooling_comes_from_the_header_unless_the_launch_says() -> None:
    assert choose_pooling("embedding", None, info(1), "m") == "mean"
    assert choose_pooling("embedding", None, info(2), "m") == "cls"
    assert choose_pooling("embedding", "last", info(1), "m") == "last"
    assert choose_pooling("rerank", None, info(4, classifier=True), "m") == "rank"


@pytest.mark.parametrize(
    ("model_type", "option", "header", "message"),
    [
        ("embedding", None, info(None), "does not say how to pool"),
        ("embedding", None, info(0), "pooling_type is none"),
        ("embedding", None, info(4, classifier=True), "is a reranker"),
        ("rerank", None, info(1), "no classification head"),
        ("rerank", "mean", info(4, classifier=True), "always uses rank pooling"),
    ],
)
def test_pooling_that_cannot_work_fails_the_launch(model_type, option, header, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LaunchFailed, match=message):
        choose_pooling(model_type, option, header, "m")


def test_pooled_defaults_and_options() -> None:
    resolved = LlamaCppConfig().resolve(cpu_count=2, context_length=512, gpu=False, pooled=True)
    assert resolved.n_parallel == DEFAULT_POOLED_SLOTS and resolved.n_threads == 1
    assert resolved.n_ctx == 512 and resolved.n_batch == resolved.n_ubatch == max(512, DEFAULT_POOLED_BATCH)
    long = LlamaCppConfig().resolve(cpu_count=8, context_length=8192, gpu=False, pooled=True)
    assert long.n_ubatch == 8192 and long.n_threads == 7  # a whole input fits one pass
    chat = LlamaCppConfig().resolve(cpu_count=2, context_length=4096, gpu=False)
    assert chat.n_parallel == 4 and chat.n_threads == 2 and chat.n_batch is None
    config = LlamaCppEngine.parse_config({"pooling_type": "cls", "normalize": False, "score_activation": "none"})
    assert isinstance(config, LlamaCppConfig) and config.pooling_type == "cls" and not config.normalize
    with pytest.raises(InvalidRequest, match="pooling_type"):
        LlamaCppEngine.parse_config({"pooling_type": "max"})


# -- llama.cpp: requests and answers -------------------------------------------------------------------------------
def test_embed_body_and_dimensions() -> None:
    assert embed_body({"input": ["a", [1, 2]]}, True, 384) == {
        "input": ["a", [1, 2]],
        "embd_normalize": 2,
        "encoding_format": "float",
    }
    assert embed_body({"input": ["a"], "dimensions": 384}, False, 384)["embd_normalize"] == -1
    with pytest.raises(InvalidRequest, match="384-dimensional") as raised:
        embed_body({"input": ["a"], "dimensions": 64}, True, 384)
    assert raised.value.param == "dimensions"


def test_served_embeddings_answer_orders_names_and_encodes() -> None:
    result = {
        "model": "/secret/path/model.gguf",
        "data": [{"index": 1, "embedding": [0.5, -1.0]}, {"index": 0, "embedding": [1.0, 0.0]}],
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }
    floats = served_embeddings_answer(result, "uid", "float")
    assert floats["model"] == "uid" and floats["object"] == "list"
    assert [row["embedding"] for row in floats["data"]] == [[1.0, 0.0], [0.5, -1.0]]
    assert floats["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
    packed = served_embeddings_answer(result, "uid", "base64")["data"][1]["embedding"]
    assert struct.unpack("<2f", base64.b64decode(packed)) == (0.5, -1.0)


def test_rerank_response_sigmoid_top_n_documents() -> None:
    assert rerank_body({"query": "q", "documents": ["a", "b", "c"], "top_n": 1}) == {
        "query": "q",
        "documents": ["a", "b", "c"],
        "top_n": 3,
    }
    result = {
        "results": [{"index": 2, "relevance_score": 3.0}, {"index": 0, "relevance_score": -1.0}],
        "usage": {"prompt_tokens": 21, "total_tokens": 21},
    }
    result["results"].append({"index": 1, "relevance_score": 0.0})
    answer = rerank_response(result, ["a", "b", "c"], 2, True, "sigmoid")
    assert [row["index"] for row in answer["results"]] == [2, 1]
    assert answer["results"][0]["relevance_score"] == pytest.approx(1 / (1 + math.exp(-3.0)))
    assert answer["results"][1] == {"index": 1, "relevance_score": 0.5, "document": {"text": "b"}}
    assert answer["meta"]["tokens"] == {"input_tokens": 21, "output_tokens": 0}
    raw = rerank_response(result, ["a", "b", "c"], None, False, "none")
    assert [(r["index"], r["relevance_score"], r["document"]) for r in raw["results"]] == [
        (2, 3.0, None),
        (1, 0.0, None),
        (0, -1.0, None),
    ]


# -- vLLM -------------------------------------------------------------------------------------------------------------
def test_vllm_pooling_arguments_by_version() -> None:
    assert pooling_args("LLM", (0, 32)) == []
    assert pooling_args("embedding", (0, 32, 0)) == ["--runner", "pooling", "--convert", "embed"]
    assert pooling_args("rerank", None) == ["--runner", "pooling"]
    assert pooling_args("embedding", (0, 9, 2)) == ["--task", "embed"]
    assert pooling_args("rerank", (0, 8)) == ["--task", "score"]


def test_vllm_server_command_for_an_embedding_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(VLLMEngine, "installed_version", classmethod(lambda cls: (0, 32, 0)))
    fam = family("embedding", "pytorch")
    engine = VLLMEngine(
        model_uid="emb",
        family=fam,
        spec=fam.model_specs[0],
        quantization="none",
        model_path="/w",
        config=VLLMEngine.parse_config({}),
        hardware=CUDA,
    )
    args = engine.server_args(python="py", port=9, api_key="k")
    assert args[args.index("--runner") : args.index("--runner") + 4] == ["--runner", "pooling", "--convert", "embed"]
    assert args[args.index("--served-model-name") + 1] == "emb"


def test_vllm_answers_become_the_platform_shapes() -> None:
    body = managed.embed_request("uid", {"input": ["a"], "dimensions": 8, "encoding_format": "base64"})
    assert body == {"model": "uid", "input": ["a"], "encoding_format": "float", "dimensions": 8}
    answer = served_embeddings_answer(
        {
            "id": "embd-1",
            "model": "uid",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.25]}],
            "usage": {"prompt_tokens": 3, "total_tokens": 3, "completion_tokens": 0},
        },
        "uid",
        "base64",
    )
    assert answer["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    assert struct.unpack("<f", base64.b64decode(answer["data"][0]["embedding"])) == (0.25,)
    assert managed.rerank_request("uid", {"query": "q", "documents": ["a", "b"], "top_n": 1})["top_n"] == 2
    served = {
        "id": "rerank-1",
        "model": "uid",
        "usage": {"prompt_tokens": 12, "total_tokens": 12},
        "results": [
            {"index": 1, "document": {"text": "b"}, "relevance_score": 0.9},
            {"index": 0, "document": {"text": "a"}, "relevance_score": 0.1},
        ],
    }
    ours = managed.rerank_answer(served, ["a", "b"], 1, False)
    assert ours["results"] == [{"index": 1, "relevance_score": 0.9, "document": None}]
    assert ours["meta"]["tokens"]["input_tokens"] == 12


# -- which engine --------------------------------------------------------------------------------------------------
def test_engine_order_for_embedding_and_rerank() -> None:
    for model_type in ("embedding", "rerank"):
        on_gpu = engine_order(CUDA, model_type)
        assert on_gpu[:3] == ("vLLM", "sentence_transformers", "llama.cpp")
        on_cpu = engine_order(CPU, model_type)
        assert on_cpu.index("sentence_transformers") < on_cpu.index("llama.cpp") < on_cpu.index("vLLM")
    assert engine_order(CUDA) == ENGINE_ORDER  # LLMs keep theirs


def test_matcher_picks_among_the_embedding_engines_with_reasons() -> None:
    cpu = CPU.model_copy(update={"engines": INSTALLED})
    cuda = CUDA.model_copy(update={"engines": INSTALLED})
    both = choices(family("embedding", "pytorch", "ggufv2"))
    assert choose_engine(None, both, cpu).engine == "sentence_transformers"
    assert choose_engine(None, both, cuda).engine == "vLLM"
    gguf_only = choices(family("embedding", "ggufv2"))
    found = choose_engine(None, gguf_only, cpu)
    assert found.engine == "llama.cpp" and found.accepted[0].spec.model_format == "ggufv2"
    assert choose_engine("llama.cpp", both, cpu).accepted[0].spec.model_format == "ggufv2"
    pytorch_only = choices(family("rerank", "pytorch"))
    with pytest.raises(EngineRejected, match="llama.cpp serves rerank models only in GGUF, not pytorch"):
        choose_engine("llama.cpp", pytorch_only, cpu)
    missing = {"sentence_transformers": "sentence-transformers is not installed", "vLLM": "vLLM is not installed"}
    bare = CPU.model_copy(update={"engines": {**INSTALLED, **missing}})
    with pytest.raises(EngineRejected) as raised:
        choose_engine(None, pytorch_only, bare)
    message = raised.value.message
    assert "llama.cpp serves rerank models only in GGUF" in message and "sentence-transformers is not" in message
    assert "Transformers" not in message and "SGLang" not in message  # engines that never serve the type say nothing
