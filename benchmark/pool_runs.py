"""Pool several ``compare_engine`` runs taken at different times into one verdict per figure.

Why: within one run the rounds alternate the sides and share the host's state of that quarter hour, so a run's
interval measures the noise from round to round, not the drift from one hour to the next. On this VM three runs
of the same code gave c=1 throughput ratios 1.087 [1.017, 1.161], 0.934 [0.877, 0.994] and 1.046 [0.982, 1.115]:
each interval is honest about its run and the three exclude each other. So here each run counts as one
observation (its own estimate's point) and the pooled figure is the interval over the runs: wide while there are
few runs, but it holds the drift. Beside it: every round of every run pooled as if they were one run (narrower,
and too sure when the runs disagree), and whether any two runs' intervals miss each other, the sign that only
the first figure can be trusted.

Usage, with the JSON that ``compare_engine --json-out`` writes::

    python -m benchmark.pool_runs run-1130.json run-1300.json run-1430.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.intervals import Estimate, difference_estimate, format_estimate, ratio_estimate

__all__ = ["METRICS", "pool_metric", "pool_runs"]

#: the per-round figures pooled by default, and whether each is a ratio (geometric) or a difference (arithmetic)
METRICS: dict[str, str] = {
    "output_throughput_ratio": "ratio",
    "tpot_p50_ratio": "ratio",
    "ttft_p50_added_ms": "difference",
    "gap_p50_ratio": "ratio",
    "platform_cpu_ms_per_token": "difference",
}


def _estimate(values: Sequence[float | None], kind: str) -> Estimate | None:
    return ratio_estimate(values) if kind == "ratio" else difference_estimate(values)


def pool_metric(runs: Sequence[Sequence[float | None]], kind: str) -> dict[str, Any] | None:
    """One figure over several runs, given each run's per-round values: ``per_run`` (each run's estimate),
    ``between_runs`` (each run one observation), ``all_rounds`` (every round as one run) and ``disagree`` (two
    runs' intervals do not overlap). None when no run has a value."""
    per_run = [estimate for values in runs if (estimate := _estimate(values, kind)) is not None]
    if not per_run:
        return None
    every_round = [value for values in runs for value in values]
    with_interval = [estimate for estimate in per_run if estimate.has_interval]
    disagree = bool(with_interval) and max(e.low for e in with_interval) > min(e.high for e in with_interval)
    return {
        "per_run": per_run,
        "between_runs": _estimate([estimate.value for estimate in per_run], kind),
        "all_rounds": _estimate(every_round, kind),
        "disagree": disagree,
    }


def pool_runs(reports: Sequence[dict[str, Any]], metrics: Sequence[str] = tuple(METRICS)) -> dict[int, dict[str, Any]]:
    """``{concurrency: {metric: pool_metric(...)}}`` over ``compare_engine`` reports (a level that some runs lack
    is pooled over the runs that have it)."""
    levels: dict[int, list[list[dict[str, Any]]]] = {}
    for report in reports:
        for level in report.get("levels", []):
            levels.setdefault(int(level["concurrency"]), []).append(level.get("rounds", []))
    pooled: dict[int, dict[str, Any]] = {}
    for concurrency, runs in sorted(levels.items()):
        figures = {}
        for metric in metrics:
            figure = pool_metric([[r.get(metric) for r in rounds] for rounds in runs], METRICS.get(metric, "ratio"))
            if figure is not None:
                figures[metric] = figure
        pooled[concurrency] = figures
    return pooled


def format_pooled(pooled: dict[int, dict[str, Any]]) -> str:
    """A table per level: each metric's runs, the interval between runs and the all-rounds interval."""
    lines = []
    for concurrency, figures in pooled.items():
        lines.append(f"c={concurrency}")
        for metric, figure in figures.items():
            runs = ", ".join(format_estimate(estimate) for estimate in figure["per_run"])
            flag = "  RUNS DISAGREE: trust the between-runs interval" if figure["disagree"] else ""
            lines.append(f"  {metric}: runs {runs}")
            between = figure["between_runs"]
            between_text = format_estimate(between) if between.has_interval else f"{between.value:.3f} (1 run)"
            lines.append(f"    between runs {between_text}  all rounds {format_estimate(figure['all_rounds'])}{flag}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="compare_engine --json-out files")
    parser.add_argument("--metric", action="append", help=f"one of {', '.join(METRICS)} (default: all)")
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.reports]
    print(format_pooled(pool_runs(reports, args.metric or tuple(METRICS))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
