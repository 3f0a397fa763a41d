"""Does concurrency raise throughput? Embeddings (c=1 vs c=16) and the Transformers engine (c=1/4/8).

Both run through ``xinference-local`` over HTTP, like a user's traffic:

- embeddings: the bundled all-MiniLM-L6-v2 (sentence-transformers engine, request batching); requests per second
  with 1 and with 16 clients in flight, and the ratio (DESIGN target: c=16 >= 3x c=1);
- Transformers: the bundled SmolLM2-135M GGUF converted to safetensors (``benchmark/_weights.py``), registered as a
  custom pytorch model and served by the Transformers engine with continuous batching; aggregate output tok/s at
  c=1, 4 and 8 (target: c=8 >= 3x c=1).

    python -m benchmark.bench_batching [--json-out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmark._proc import start_platform
from benchmark._weights import converted_smollm2
from benchmark.bench_serving import build_prompts, run_benchmark
from benchmark.stats import summarize

__all__ = ["embedding_rates", "main", "run_batching", "transformers_rates"]

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
SENTENCES = [f"Sentence number {i} talks about a {w} near the river." for i, w in
             enumerate(["cat", "dog", "boat", "bridge", "tree", "house", "bird", "train"] * 8)]


async def _embedding_run(api: str, concurrency: int, requests: int) -> float:
    """Requests per second for ``requests`` single-sentence embedding calls with ``concurrency`` in flight."""
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:

        async def one(i: int) -> None:
            async with limit:
                response = await client.post(f"{api}/embeddings",
                                             json={"model": EMBEDDING_MODEL, "input": SENTENCES[i % len(SENTENCES)]})
                response.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(min(8, requests))))  # warm-up
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return requests / (time.perf_counter() - started)


def embedding_rates(api: str, requests: int = 96) -> dict[str, float]:
    response = httpx.post(f"{api}/models", json={"model_name": EMBEDDING_MODEL, "model_type": "embedding"},
                          timeout=300)
    response.raise_for_status()
    c1 = asyncio.run(_embedding_run(api, 1, requests))
    c16 = asyncio.run(_embedding_run(api, 16, requests))
    httpx.delete(f"{api}/models/{EMBEDDING_MODEL}", timeout=60)
    return {"c1_req_s": c1, "c16_req_s": c16, "ratio": c16 / c1}


def transformers_rates(api: str, max_tokens: int = 32, levels: tuple[int, ...] = (1, 4, 8)) -> dict[str, Any]:
    folder = converted_smollm2()
    family = {"model_name": "smollm2-pytorch-bench", "model_ability": ["chat", "generate"], "context_length": 2048,
              "model_specs": [{"model_format": "pytorch", "model_size_in_billions": "0_135",
                               "quantizations": ["none"], "model_uri": f"file://{folder}"}]}
    httpx.post(f"{api}/model_registrations/LLM", json={"model": json.dumps(family)}, timeout=30).raise_for_status()
    launched = httpx.post(f"{api}/models", json={"model_name": "smollm2-pytorch-bench", "model_engine": "Transformers",
                                                 "max_num_seqs": max(levels)}, timeout=300)
    launched.raise_for_status()
    results: dict[str, Any] = {}
    for level in levels:
        prompts = build_prompts(2 * level, seed=level)
        asyncio.run(run_benchmark(api, "smollm2-pytorch-bench", "chat", prompts[:1], 1, 4))  # warm-up
        runs, wall = asyncio.run(run_benchmark(api, "smollm2-pytorch-bench", "chat", prompts, level, max_tokens,
                                               ignore_eos=True))
        summary = summarize(runs, wall)
        results[f"c{level}_tok_s"] = summary["output_throughput"]
        results[f"c{level}_errors"] = summary["errors"]
    results["ratio_c8_c1"] = results[f"c{max(levels)}_tok_s"] / results["c1_tok_s"]
    httpx.delete(f"{api}/models/smollm2-pytorch-bench", timeout=60)
    return results


def run_batching() -> dict[str, Any]:
    """Both measurements on a fresh ``xinference-local``."""
    with tempfile.TemporaryDirectory() as home:
        platform = start_platform(Path(home))
        try:
            return {"embeddings": embedding_rates(platform.api), "transformers": transformers_rates(platform.api)}
        finally:
            platform.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    report = run_batching()
    emb, tf = report["embeddings"], report["transformers"]
    print(f"embeddings req/s: c=1 {emb['c1_req_s']:.1f}, c=16 {emb['c16_req_s']:.1f} ({emb['ratio']:.2f}x)")
    print(f"Transformers tok/s: c=1 {tf['c1_tok_s']:.1f}, c=4 {tf['c4_tok_s']:.1f}, c=8 {tf['c8_tok_s']:.1f} "
          f"({tf['ratio_c8_c1']:.2f}x)")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
