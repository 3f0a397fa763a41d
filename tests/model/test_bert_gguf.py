"""The BERT -> GGUF converter on the real all-MiniLM-L6-v2 and the seeded tiny cross-encoder: what the files hold,
read back with gguf's own reader (``tests/engines/test_llama_cpp_pooled.py`` serves them on llama.cpp)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

from tests.gguf_models import minilm_folder  # noqa: E402
from xinference.model.bert_gguf import convert_bert_to_gguf  # noqa: E402
from xinference.model.gguf_info import read_gguf_info  # noqa: E402


def field(reader, key: str):  # type: ignore[no-untyped-def]
    return reader.fields[key].contents()


def test_minilm_embedding_file(minilm_gguf_path: Path) -> None:
    reader = gguf.GGUFReader(minilm_gguf_path)
    assert field(reader, "general.architecture") == "bert"
    assert field(reader, "bert.pooling_type") == gguf.PoolingType.MEAN
    assert field(reader, "bert.block_count") == 6 and field(reader, "bert.embedding_length") == 384
    assert field(reader, "tokenizer.ggml.model") == "bert"
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert tokens[101] == "[CLS]" and tokens[102] == "[SEP]" and len(tokens) == 30522
    assert "\u2581cat" in tokens and "ing" in tokens  # a word start, and "##ing" as a continuation
    tensors = {t.name: t for t in reader.tensors}
    assert tensors["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.F16
    assert tensors["blk.0.attn_q.bias"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tensors["token_types.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert not any(name.startswith("cls") for name in tensors)
    info = read_gguf_info(str(minilm_gguf_path))
    assert (info.pooling_type, info.context_length, info.has_classifier) == (1, 512, False)


@pytest.mark.heavy  # builds the cross-encoder with torch and transformers
def test_reranker_file_has_the_head_where_llama_cpp_reads_it(tiny_reranker_paths: tuple[Path, Path]) -> None:
    reader = gguf.GGUFReader(tiny_reranker_paths[1])
    assert field(reader, "bert.pooling_type") == gguf.PoolingType.RANK
    assert field(reader, "tokenizer.chat_template.rerank") == "[CLS]{query}[SEP]{document}[SEP]"
    shapes = {t.name: list(t.shape) for t in reader.tensors}
    assert shapes["cls.weight"] == [128, 128] and shapes["cls.output.weight"] == [128, 1]
    assert read_gguf_info(str(tiny_reranker_paths[1])).has_classifier


def test_what_it_cannot_convert_is_refused(tmp_path: Path) -> None:
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ValueError, match="not a BERT model"):
        convert_bert_to_gguf(llama, tmp_path / "x.gguf")
    cased = tmp_path / "cased"
    shutil.copytree(minilm_folder(), cased, ignore=shutil.ignore_patterns("*.safetensors"))
    config = json.loads((cased / "tokenizer_config.json").read_text())
    (cased / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    with pytest.raises(ValueError, match="cased"):
        convert_bert_to_gguf(cased, tmp_path / "y.gguf")
