"""Sections of ``results/latest.md`` beyond llama.cpp: the other engines against their own servers, launch figures
per engine, batching, and the optional scale and defaults studies.

Each function takes its part of the :func:`benchmark.run_all.run` report and returns markdown lines (empty when
that part is absent). The batching, scale and defaults sections render whatever figures their benchmarks return
(keys like ``c4_tok_s``, ``ratio_c8_c1``; any flat JSON for the studies), so those benchmarks may add levels and
keys without a change here.
"""

from __future__ import annotations

import re
from typing import Any

from benchmark._md import n, pair, table

__all__ = [
    "SIDE_NOTES",
    "batching_section",
    "engine_compare_section",
    "engines_sections",
    "launch_section",
    "study_section",
]

#: What "raw" and "ours" are, per engine.
SIDE_NOTES: dict[str, str] = {
    "vLLM": "Raw = vLLM's own OpenAI server, started with the command line and engine variables of the platform's "
    "vLLM process; ours = `xinference-local` → model actor → the same kind of vLLM server (proxied).",
    "MLX": "Raw = `mlx_lm.server` from the MLX env, with the platform's batch sizes, OpenBLAS and rope fix (EOS "
    "banned by `logit_bias` instead of `ignore_eos`); ours = `xinference-local` → model process running "
    "mlx-lm in-process.",
}
_RATE_KEY = re.compile(r"^c(\d+)_(tok|req)_s$")


def engine_compare_section(name: str, result: dict[str, Any]) -> list[str]:
    """One engine's raw-vs-ours table: throughput, TTFT, TPOT and ITL side by side, and CPU per token."""
    if "levels" not in result:
        why = result.get("skipped") or result.get("error")
        return [f"### {name}: raw engine vs platform", "", f"Not measured: {why}", ""]
    config = result["config"]
    lines = [
        f"### {name}: raw engine vs platform",
        "",
        f"{config['num_prompts']} prompts per run, {config['max_tokens']} tokens each (`ignore_eos`), "
        f"{config['rounds']} round(s), A/B alternating; launch on the platform {n(result.get('launch_seconds'), 1)} s, "
        f"raw server ready in {n(result.get('raw_ready_seconds'), 1)} s. {SIDE_NOTES.get(name, '')}",
        "",
    ]
    rows = []
    for level in result["levels"]:
        raw, ours, cmp = level["raw"], level["ours"], level["compare"]
        cpu = level.get("platform_cpu_ms_per_token") or {}
        rows.append(
            [
                str(level["concurrency"]),
                pair(raw["output_throughput"], ours["output_throughput"]),
                n(cmp["output_throughput_ratio"], 3),
                pair(raw["ttft_ms_p50"], ours["ttft_ms_p50"]),
                n(cmp["ttft_p50_added_ms"], 1, sign=True),
                pair(raw["tpot_ms_p50"], ours["tpot_ms_p50"], 2),
                n(cmp["tpot_p50_ratio"], 3),
                pair(raw.get("itl_ms_p50"), ours.get("itl_ms_p50")),
                pair(raw.get("itl_ms_p99"), ours.get("itl_ms_p99")),
                pair(raw.get("gap_ms_p50"), ours.get("gap_ms_p50")),
                n(cpu.get("total"), 3),
                f"{level['max_foreign_share']:.0%}",
            ]
        )
    lines += table(
        [
            "c",
            "tok/s raw / ours",
            "ratio",
            "TTFT p50 ms raw / ours",
            "TTFT added ms",
            "TPOT p50 ms raw / ours",
            "TPOT ratio",
            "ITL p50 ms raw / ours",
            "ITL p99 ms raw / ours",
            "delivery gap p50 ms raw / ours",
            "platform CPU ms/token",
            "others' load (max)",
        ],
        rows,
    )
    lines.append("")
    if result.get("problems"):
        lines += ["Problems: " + "; ".join(result["problems"]), ""]
    if not result.get("prompt_tokens_equal", True):
        lines += ["Prompt token totals differ between the sides (different chat templating?).", ""]
    return lines


def launch_section(launches: dict[str, Any]) -> list[str]:
    """Install, launch and first-token time per engine (:mod:`benchmark.engine_launch`)."""
    rows = []
    for engine, row in launches.get("engines", {}).items():
        install = row.get("install") or {}
        spent = f"{n(install.get('seconds'), 1)} s" if install.get("seconds") is not None else ""
        status = row.get("skipped") or row.get("error") or ""
        rows.append(
            [
                engine,
                f"{install.get('status', '')} {spent}".strip(),
                f"{n(row.get('launch_seconds'))} s",
                f"{n(row.get('first_token_seconds'))} s",
                f"{n(row.get('model_rss_mb'), 0)} MiB",
                status[:120],
            ]
        )
    return [
        "## Engines: install, launch, first token",
        "",
        "One engine at a time on a fresh platform: `POST /v1/models` wall time, then a streamed request's first "
        "content chunk right after it (cold), and the model processes' RSS.",
        "",
        *table(["engine", "install", "launch", "first token after launch", "model RSS", "note"], rows),
        "",
    ]


def _rates(figures: dict[str, Any]) -> dict[str, dict[int, float | None]]:
    """Rates by unit (``tok/s``, ``req/s``) and concurrency level, from keys like ``c4_tok_s``."""
    found: dict[str, dict[int, float | None]] = {}
    for key, value in figures.items():
        match = _RATE_KEY.match(key)
        if match and (value is None or isinstance(value, (int, float))):
            unit = "tok/s" if match.group(2) == "tok" else "req/s"
            found.setdefault(unit, {})[int(match.group(1))] = value
    return found


def batching_section(batching: dict[str, Any]) -> list[str]:
    """Throughput per concurrency level for each batched workload and unit, whatever levels were measured; the
    workload's ratios (``ratio*`` keys) on its first row."""
    workloads = {name: figures for name, figures in batching.items() if isinstance(figures, dict)}
    levels = sorted({c for figures in workloads.values() for rates in _rates(figures).values() for c in rates})
    rows = []
    for name, figures in workloads.items():
        ratios = ", ".join(
            f"{key.removeprefix('ratio').strip('_') or 'gain'} {n(value)} x"
            for key, value in figures.items()
            if key.startswith("ratio") and value is not None
        )
        for index, (unit, rates) in enumerate(sorted(_rates(figures).items(), key=lambda item: item[0] != "req/s")):
            rows.append(
                [
                    f"{name} ({unit})",
                    *(n(rates[c], 1) if c in rates else "" for c in levels),
                    ratios if index == 0 else "",
                ]
            )
    return [
        "## Batching (through the platform, over HTTP)",
        "",
        *table(["workload", *(f"c={c}" for c in levels), "gain"], rows),
        "",
    ]


def study_section(title: str, study: dict[str, Any], source: str) -> list[str]:
    """A study another benchmark wrote (``results/scale.json``, ``results/defaults.json``): its ``summary`` or
    ``markdown`` when it provides one, else its top-level figures."""
    lines = [f"## {title}", "", f"From `{source}`.", ""]
    if isinstance(study.get("markdown"), str):
        return [*lines, *_nested(study["markdown"]), ""]
    summary = study.get("summary")
    figures: dict[str, Any] = summary if isinstance(summary, dict) else study
    rows = [[str(key), _cell(value)] for key, value in figures.items() if not isinstance(value, (dict, list))]
    return [*lines, *table(["figure", "value"], rows), ""] if rows else [*lines, "_No flat figures to show._", ""]


def _nested(markdown: str) -> list[str]:
    """A study's own write-up under this report's section: its headings two levels deeper (``#`` -> ``###``)."""
    lines, fenced = [], False
    for line in markdown.rstrip().splitlines():
        fenced = fenced != line.startswith("```")
        lines.append("##" + line if line.startswith("#") and not fenced else line)
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return n(value, 3)
    return str(value).replace("|", "\\|")


def engines_sections(report: dict[str, Any]) -> list[str]:
    """Every section of this module that the report has data for, in reading order."""
    lines: list[str] = []
    engines = report.get("engines") or {}
    if engines:
        lines += ["## Other engines against their own servers", ""]
        for name, result in engines.items():
            lines += engine_compare_section(name, result)
    if report.get("engine_launch"):
        lines += launch_section(report["engine_launch"])
    for key, title in (("scale", "Scale simulation"), ("defaults", "llama.cpp defaults study")):
        if report.get(key):
            lines += study_section(title, report[key], f"benchmark/results/{key}.json / .md")
    return lines
