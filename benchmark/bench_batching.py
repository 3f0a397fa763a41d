"""Does concurrency raise throughput? Embeddings (c=1/4/16) and the Transformers engine (c=1/4/8/16).

Both run through ``xinference-local`` over HTTP, like a user's traffic:

- embeddings: the bundled all-MiniLM-L6-v2 (sentence-transformers engine, request batching); requests per second
  and input tokens per second (the ``usage.prompt_tokens`` the server reports, summed, over the run's wall time)
  with 1, 4 and 16 clients in flight, and the ratio to c=1 (DESIGN target: c=16 >= 3x c=1). Every run embeds
  sentences no earlier run sent (seeded per run), so no cache anywhere can flatter a level. Beside the rates, the
  CPU milliseconds the platform's processes spent per request at each level (what a shared host's load changes
  least), and the in-process reference: sentence-transformers itself embedding the c=16 level's sentences 16 at a
  time in a child process (:mod:`benchmark._st_reference`), right after the platform did (issue 24 target: the
  platform's c=16 >= 0.9x the reference);
- Transformers: the bundled SmolLM2-135M GGUF converted to safetensors (``benchmark/_weights.py``), registered as a
  custom pytorch model and served by the Transformers engine with continuous batching; aggregate output tok/s at
  c=1, 4, 8 and 16 and each level's ratio to c=1 (target: c=8 >= 3x c=1).

    python -m benchmark.bench_batching [--json-out PATH] [--only embeddings|transformers]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark._proc import start_platform
from benchmark._weights import converted_smollm2
from benchmark.bench_serving import build_prompts, run_benchmark
from benchmark.stats import summarize

__all__ = [
    "EMBEDDING_LEVELS",
    "TRANSFORMERS_LEVELS",
    "embedding_rates",
    "fresh_sentences",
    "main",
    "run_batching",
    "transformers_rates",
]

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
EMBEDDING_LEVELS = (1, 4, 16)
TRANSFORMERS_LEVELS = (1, 4, 8, 16)

_WORDS = (
    "river",
    "engine",
    "quietly",
    "harbour",
    "lantern",
    "orbit",
    "copper",
    "meadow",
    "signal",
    "winter",
    "ledger",
    "falcon",
    "thunder",
    "garden",
    "matrix",
    "velvet",
    "canyon",
    "pilot",
    "marble",
    "echo",
    "harvest",
    "circuit",
    "glacier",
    "beacon",
    "saddle",
    "compass",
    "orchard",
    "violin",
    "tunnel",
    "prism",
    "anchor",
    "desert",
    "ember",
    "fabric",
    "granite",
    "island",
    "jasmine",
    "kettle",
    "lagoon",
    "mosaic",
    "nectar",
    "oyster",
    "pepper",
    "quartz",
    "ribbon",
    "summit",
    "timber",
    "umbrella",
    "valley",
    "walnut",
    "yonder",
    "zephyr",
    "carefully",
    "rapidly",
    "under",
    "over",
    "beside",
    "through",
    "the",
    "a",
    "every",
    "some",
    "bright",
    "hollow",
    "ancient",
    "restless",
)


def fresh_sentences(count: int, seed: int, min_words: int = 4, max_words: int = 48) -> list[str]:
    """``count`` sentences of varied length that no other ``seed`` produces (the seed is written into each one).

    Lengths are spread over ``min_words``..``max_words`` so padding inside a shared forward pass is part of what
    is measured, as with real traffic.
    """
    rng = random.Random(seed)
    out = []
    for index in range(count):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(min_words, max_words))]
        out.append(f"Note {seed}-{index}: " + " ".join(words) + ".")
    return out


async def _embedding_run(
    api: str, concurrency: int, sentences: list[str], warmup: list[str], model: str = EMBEDDING_MODEL
) -> dict[str, float]:
    """One level: every sentence sent as its own request with ``concurrency`` in flight; rates over the wall time."""
    limit = asyncio.Semaphore(concurrency)
    tokens = 0
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:

        async def one(text: str) -> int:
            async with limit:
                response = await client.post(f"{api}/embeddings", json={"model": model, "input": text})
                if response.status_code != 200:
                    raise RuntimeError(
                        f"embedding request failed at c={concurrency}: {response.status_code} {response.text[:500]}"
                    )
                used: int = response.json()["usage"]["prompt_tokens"]
                return used

        await asyncio.gather(*(one(text) for text in warmup))
        started = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(text) for text in sentences)))
        elapsed = time.perf_counter() - started
    return {"req_s": len(sentences) / elapsed, "tok_s": tokens / elapsed}


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds of ``processes`` so far (a process that exited counts 0)."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def inprocess_reference(sentences: list[str], warmup: list[str], batch: int = 16) -> dict[str, Any]:
    """sentence-transformers itself embedding ``sentences`` ``batch`` at a time in a child process
    (:mod:`benchmark._st_reference`): ``req_s``, ``tok_s``, ``cpu_ms_per_req``, ``threads``, ``vectors``."""
    request = json.dumps({"sentences": sentences, "warmup": warmup, "batch": batch})
    done = subprocess.run(
        [sys.executable, "-m", "benchmark._st_reference"],
        input=request,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the in-process reference failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def embedding_rates(
    api: str,
    requests: int = 96,
    levels: tuple[int, ...] = EMBEDDING_LEVELS,
    seed: int | None = None,
    launch_options: dict[str, Any] | None = None,
    processes: Callable[[], list[psutil.Process]] | None = None,
    reference: bool = True,
) -> dict[str, float]:
    """Launch the bundled embedding model (with ``launch_options``, e.g. ``{"n_threads": 1}``), measure each level,
    unload it.

    Returns ``c{level}_req_s`` and ``c{level}_tok_s`` for every level, ``ratio`` (c=16 over c=1 requests/s, the
    DESIGN figure) and ``ratio_tok`` (the same for tokens/s); ``ratio_c{level}`` for the other levels. With
    ``processes`` (the platform's process tree, e.g. ``Platform.tree``), ``c{level}_cpu_ms`` too: the CPU
    milliseconds those processes spent per request of the level (warm-up included in both). With ``reference``,
    the in-process sentence-transformers reference on the highest level's sentences, measured right after it:
    ``inprocess_req_s``, ``inprocess_tok_s``, ``inprocess_cpu_ms`` and ``ratio_vs_inprocess`` (the platform's
    requests/s at the highest level over the reference's).
    """
    response = httpx.post(
        f"{api}/models",
        json={"model_name": EMBEDDING_MODEL, "model_type": "embedding", **(launch_options or {})},
        timeout=300,
    )
    if response.status_code != 200:
        raise RuntimeError(f"launching {EMBEDDING_MODEL} failed: {response.status_code} {response.text[:500]}")
    base = seed if seed is not None else time.time_ns() % 1_000_000_007
    seeds = itertools.count(base * 100)
    results: dict[str, float] = {}
    low, high = min(levels), max(levels)
    tree = processes() if processes is not None else []
    try:
        for level in levels:
            warmup = fresh_sentences(min(8, requests), next(seeds))
            sentences = fresh_sentences(requests, next(seeds))
            cpu_before = _cpu_seconds(tree)
            rates = asyncio.run(_embedding_run(api, level, sentences, warmup))
            results[f"c{level}_req_s"] = rates["req_s"]
            results[f"c{level}_tok_s"] = rates["tok_s"]
            if tree:
                results[f"c{level}_cpu_ms"] = (_cpu_seconds(tree) - cpu_before) * 1000 / (len(sentences) + len(warmup))
            if reference and level == high:
                ref = inprocess_reference(sentences, warmup, batch=high)
                results["inprocess_req_s"] = ref["req_s"]
                results["inprocess_tok_s"] = ref["tok_s"]
                results["inprocess_cpu_ms"] = ref["cpu_ms_per_req"]
                results["inprocess_threads"] = ref["threads"]
                results["ratio_vs_inprocess"] = rates["req_s"] / ref["req_s"]
    finally:
        httpx.delete(f"{api}/models/{EMBEDDING_MODEL}", timeout=60)
    for level in levels:
        if level != low:
            results[f"ratio_c{level}"] = results[f"c{level}_req_s"] / results[f"c{low}_req_s"]
    results["ratio"] = results[f"c{high}_req_s"] / results[f"c{low}_req_s"]
    results["ratio_tok"] = results[f"c{high}_tok_s"] / results[f"c{low}_tok_s"]
    return results


def transformers_rates(api: str, max_tokens: int = 32, levels: tuple[int, ...] = TRANSFORMERS_LEVELS) -> dict[str, Any]:
    """Output tok/s of the Transformers engine at each level (``c{level}_tok_s``, ``c{level}_errors``) and each
    level's ratio to c=1 (``ratio_c{level}_c1``; ``ratio_c8_c1`` is the DESIGN figure)."""
    folder = converted_smollm2()
    family = {
        "model_name": "smollm2-pytorch-bench",
        "model_ability": ["chat", "generate"],
        "context_length": 2048,
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_135",
                "quantizations": ["none"],
                "model_uri": f"file://{folder}",
            }
        ],
    }
    httpx.post(f"{api}/model_registrations/LLM", json={"model": json.dumps(family)}, timeout=30).raise_for_status()
    launched = httpx.post(
        f"{api}/models",
        json={"model_name": "smollm2-pytorch-bench", "model_engine": "Transformers", "max_num_seqs": max(levels)},
        timeout=300,
    )
    launched.raise_for_status()
    results: dict[str, Any] = {}
    try:
        for level in levels:
            prompts = build_prompts(2 * level, seed=level)
            asyncio.run(run_benchmark(api, "smollm2-pytorch-bench", "chat", prompts[:1], 1, 4))  # warm-up
            runs, wall = asyncio.run(
                run_benchmark(api, "smollm2-pytorch-bench", "chat", prompts, level, max_tokens, ignore_eos=True)
            )
            summary = summarize(runs, wall)
            results[f"c{level}_tok_s"] = summary["output_throughput"]
            results[f"c{level}_errors"] = summary["errors"]
    finally:
        httpx.delete(f"{api}/models/smollm2-pytorch-bench", timeout=60)
    low = min(levels)
    for level in levels:
        if level != low and results[f"c{low}_tok_s"]:
            results[f"ratio_c{level}_c{low}"] = results[f"c{level}_tok_s"] / results[f"c{low}_tok_s"]
    return results


def run_batching(
    parts: tuple[str, ...] = ("embeddings", "transformers"), embedding_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The measurements named in ``parts`` on a fresh ``xinference-local``."""
    with tempfile.TemporaryDirectory() as home:
        platform = start_platform(Path(home))
        try:
            report: dict[str, Any] = {}
            if "embeddings" in parts:
                report["embeddings"] = embedding_rates(
                    platform.api, launch_options=embedding_options, processes=platform.tree
                )
            if "transformers" in parts:
                report["transformers"] = transformers_rates(platform.api)
            return report
        finally:
            platform.stop()


def _levels_line(rates: dict[str, Any], key: str, levels: tuple[int, ...]) -> str:
    return ", ".join(f"c={level} {rates[f'c{level}_{key}']:.1f}" for level in levels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--only", choices=["embeddings", "transformers"], default=None)
    parser.add_argument(
        "--embedding-options",
        type=json.loads,
        default=None,
        help="launch options of the embedding model as JSON, e.g. '{\"n_threads\": 1}'",
    )
    args = parser.parse_args()
    report = run_batching((args.only,) if args.only else ("embeddings", "transformers"), args.embedding_options)
    if "embeddings" in report:
        emb = report["embeddings"]
        print(f"embeddings req/s: {_levels_line(emb, 'req_s', EMBEDDING_LEVELS)} ({emb['ratio']:.2f}x)")
        print(f"embeddings tok/s: {_levels_line(emb, 'tok_s', EMBEDDING_LEVELS)} ({emb['ratio_tok']:.2f}x)")
        if "c1_cpu_ms" in emb:
            print(f"embeddings platform CPU ms/request: {_levels_line(emb, 'cpu_ms', EMBEDDING_LEVELS)}")
        if "ratio_vs_inprocess" in emb:
            print(
                f"embeddings req/s c=16 / in-process sentence-transformers c=16: {emb['ratio_vs_inprocess']:.2f}x "
                f"(reference {emb['inprocess_req_s']:.1f} req/s, {emb['inprocess_cpu_ms']:.1f} CPU ms/request, "
                f"{emb['inprocess_threads']:.0f} torch threads)"
            )
    if "transformers" in report:
        tf = report["transformers"]
        ratios = ", ".join(f"c={level} {tf[f'ratio_c{level}_c1']:.2f}x" for level in TRANSFORMERS_LEVELS[1:])
        print(f"Transformers tok/s: {_levels_line(tf, 'tok_s', TRANSFORMERS_LEVELS)} (vs c=1: {ratios})")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
