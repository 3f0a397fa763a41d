"""DESIGN §6 as numbers: each measured figure of a benchmark report held against its target.

Used by :mod:`benchmark.run_all` (printed after a run) and :mod:`benchmark.report` (the targets table and the gaps
of ``results/latest.md``). The same parity targets apply to every engine compared with its own server: llama.cpp
(``report["compare"]``) and each entry of ``report["engines"]`` (vLLM, MLX).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "evaluate_targets"]

RATIO_MIN = 0.98
TTFT_ADDED_MAX_MS = 3.0
PLATFORM_CPU_MAX_MS = 0.3
BATCHING_GAIN_MIN = 3.0
#: smooth streams: the platform's delivery gap p50 at most this many times the raw engine's (c=1 and c=4)
GAP_RATIO_MAX = 1.5
SMOOTHNESS_LEVELS = (1, 4)


@dataclass(frozen=True)
class Verdict:
    """One figure held against its target; ``met`` is ``None`` when the figure could not be measured."""

    name: str
    value: float | None
    target: str
    met: bool | None
    unit: str = ""
    detail: str = ""

    @property
    def status(self) -> str:
        return "n/a" if self.met is None else ("met" if self.met else "MISSED")


def _check(value: float | None, ok: Callable[[float], bool]) -> bool | None:
    return None if value is None else ok(value)


def parity_verdicts(compare: dict[str, Any], prefix: str = "", slots: int = 0, cpu_note: str = "") -> list[Verdict]:
    """Throughput ratio, TTFT added and platform CPU per token at each level of one raw-vs-ours comparison."""
    verdicts: list[Verdict] = []
    for level in compare.get("levels", []):
        c = level["concurrency"]
        ratio = level["compare"]["output_throughput_ratio"]
        added = level["compare"]["ttft_p50_added_ms"]
        cpu = (level.get("platform_cpu_ms_per_token") or {}).get("total")
        verdicts += [
            Verdict(
                f"{prefix}output tok/s ours/raw, c={c}",
                ratio,
                f">= {RATIO_MIN}",
                _check(ratio, lambda v: v >= RATIO_MIN),
                "x",
            ),
            Verdict(
                f"{prefix}TTFT p50 added, c={c}",
                added,
                f"<= +{TTFT_ADDED_MAX_MS:g} ms",
                _check(added, lambda v: v <= TTFT_ADDED_MAX_MS),
                "ms",
                "includes waiting for a free slot (c > n_parallel): grows with any TPOT loss" if c > slots else "",
            ),
            Verdict(
                f"{prefix}platform CPU per output token, c={c}",
                cpu,
                f"< {PLATFORM_CPU_MAX_MS} ms",
                _check(cpu, lambda v: v < PLATFORM_CPU_MAX_MS),
                "ms",
                cpu_note,
            ),
        ]
        raw_gap, our_gap = level["raw"].get("gap_ms_p50"), level["ours"].get("gap_ms_p50")
        if c in SMOOTHNESS_LEVELS and raw_gap and our_gap is not None:
            gap = our_gap / raw_gap
            verdicts.append(
                Verdict(
                    f"{prefix}stream delivery gap p50 ours/raw, c={c}",
                    gap,
                    f"<= {GAP_RATIO_MAX:g}",
                    _check(gap, lambda v: v <= GAP_RATIO_MAX),
                    "x",
                    "time between separate arrivals of text (chunks arriving together count once)",
                )
            )
    return verdicts


def _control_verdicts(control: dict[str, Any]) -> list[Verdict]:
    ready = control.get("ready_seconds_median")
    launch, load = control.get("launch_seconds_median"), control.get("engine_load_seconds_median")
    budget = None if load is None else load + 1.0
    idle = (control.get("idle") or {}).get("rss_mb")
    return [
        Verdict("xinference-local ready (median)", ready, "<= 3 s", _check(ready, lambda v: v <= 3), "s"),
        Verdict(
            "model launch (median)",
            launch,
            "<= engine load + 1 s" + (f" = {budget:.2f} s" if budget is not None else ""),
            None if launch is None or budget is None else launch <= budget,
            "s",
        ),
        Verdict("idle RSS of the platform's processes", idle, "<= 300 MiB", _check(idle, lambda v: v <= 300), "MiB"),
    ]


def _batching_verdicts(batching: dict[str, Any]) -> list[Verdict]:
    emb, tf = batching.get("embeddings") or {}, batching.get("transformers") or {}
    verdicts = []
    if "ratio" in emb:
        verdicts.append(
            Verdict(
                "embeddings req/s, c=16 / c=1",
                emb["ratio"],
                f">= {BATCHING_GAIN_MIN:g}",
                _check(emb["ratio"], lambda v: v >= BATCHING_GAIN_MIN),
                "x",
            )
        )
    if "ratio_c8_c1" in tf:
        verdicts.append(
            Verdict(
                "Transformers tok/s, c=8 / c=1",
                tf["ratio_c8_c1"],
                f">= {BATCHING_GAIN_MIN:g}",
                _check(tf["ratio_c8_c1"], lambda v: v >= BATCHING_GAIN_MIN),
                "x",
            )
        )
    return verdicts


def evaluate_targets(report: dict[str, Any]) -> list[Verdict]:
    """Engine parity per concurrency level (llama.cpp, then every other engine), control plane, batching."""
    compare = report.get("compare") or {}
    slots = (compare.get("engine_settings") or {}).get("n_parallel", 0)
    verdicts = parity_verdicts(compare, "", slots, "API process + model actor's event loop (lower bound)")
    for name, result in (report.get("engines") or {}).items():
        if "levels" in result:
            seqs = (result.get("config") or {}).get("n_parallel", 0)
            note = (
                "API process + the whole model actor, which only proxies"
                if name == "vLLM"
                else "API process + model actor's event loop (lower bound)"
            )
            verdicts += parity_verdicts(result, f"{name}: ", seqs, note)
    if report.get("control_plane"):
        verdicts += _control_verdicts(report["control_plane"])
    if report.get("batching"):
        verdicts += _batching_verdicts(report["batching"])
    return verdicts
