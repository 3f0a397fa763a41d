"""The soak test's pure parts: the least-squares RSS slope, the per-process summary, the verdict and the report."""

from __future__ import annotations

import math

import pytest

from benchmark.soak import (
    ProcessSeries,
    leak_suspects,
    least_squares_slope,
    render_markdown,
    summarize_series,
    verdict,
)


def test_slope_of_a_straight_line() -> None:
    assert least_squares_slope([(0, 10), (1, 12), (2, 14), (3, 16)]) == pytest.approx(2.0)
    assert least_squares_slope([(0, 5), (10, 5), (20, 5)]) == 0.0
    assert least_squares_slope([(0, 9), (1, 6), (2, 3)]) == pytest.approx(-3.0)


def test_slope_fits_noisy_points() -> None:
    points = [(0, 1.0), (1, 2.5), (2, 2.5), (3, 4.0)]
    assert least_squares_slope(points) == pytest.approx(0.9)  # 4.5 / 5 by the normal equations


def test_slope_is_zero_without_spread() -> None:
    assert least_squares_slope([]) == 0.0
    assert least_squares_slope([(1, 3)]) == 0.0
    assert least_squares_slope([(2, 1), (2, 9)]) == 0.0


def _series(label: str, mib_per_min: float, minutes: float = 10, warmup_jump: float = 0.0) -> ProcessSeries:
    series = ProcessSeries(pid=42, label=label, create_time=1.0)
    steps = int(minutes * 12)  # a sample every 5 s
    for i in range(steps + 1):
        t = i * 5.0
        jump = warmup_jump if t >= 60 else 0.0  # grows once during the first minute, then flat
        series.samples.append((t, 100.0 + mib_per_min * t / 60 + jump, 20 + (i % 2)))
    return series


def test_summary_reports_slope_per_minute_and_fds() -> None:
    summary = summarize_series(_series("model x [42]", 0.5))
    assert summary["slope_mib_per_min"] == pytest.approx(0.5, abs=1e-3)
    assert summary["slope_after_warmup_mib_per_min"] == pytest.approx(0.5, abs=1e-3)
    assert (summary["rss_first_mib"], summary["minutes_sampled"], summary["samples"]) == (100.0, 10.0, 121)
    assert (summary["fds_first"], summary["fds_last"], summary["exited"]) == (20, 20, False)


def test_warm_up_growth_is_not_counted_after_warm_up() -> None:
    summary = summarize_series(_series("server", 0.0, warmup_jump=50.0))
    assert summary["slope_mib_per_min"] > 1.0  # the jump tilts the whole-run fit
    assert summary["slope_after_warmup_mib_per_min"] == 0.0
    assert leak_suspects([summary], 10) == []


def test_leak_suspects_need_lasting_growth_in_a_long_run() -> None:
    leaking = summarize_series(_series("model chat [7]", 3.0))
    assert leak_suspects([leaking], 10) == ["model chat [7]"]
    assert leak_suspects([leaking], 2) == []  # too short a run to call it
    gone = {**leaking, "exited": True}
    assert leak_suspects([gone], 10) == []


def test_empty_series_summarizes_without_failing() -> None:
    summary = summarize_series(ProcessSeries(pid=1, label="x", create_time=0.0))
    assert summary["samples"] == 0 and summary["rss_first_mib"] is None
    assert math.isclose(summary["slope_mib_per_min"], 0.0)


def _report(**overrides: object) -> dict[str, object]:
    report: dict[str, object] = {
        "minutes": 10.0,
        "concurrency": 16,
        "machine": "2 CPU cores, 8 GiB RAM",
        "started": "2026-01-01 00:00 UTC",
        "churn_model": "gemma-3-270m",
        "churn_cycles": 19,
        "done": {"chat": 120, "chat_stream": 150, "embeddings": 90},
        "errors": {},
        "error_samples": [],
        "leftovers": [],
        "leak_suspects": [],
        "notes": ["busy machine"],
        "processes": [summarize_series(_series("server (API + supervisor + worker)", 0.1))],
    }
    report.update(overrides)
    return report


def test_verdict_fails_on_errors_and_leftovers_only() -> None:
    assert verdict(_report()) == []
    assert verdict(_report(leak_suspects=["model chat [7]"])) == []
    assert verdict(_report(errors={"chat:http_500": 2})) == ["2 error(s) of kind chat:http_500"]
    assert verdict(_report(leftovers=[{"pid": 9, "label": "model soak-chat [9]"}])) == [
        "leftover process after shutdown: model soak-chat [9] (pid 9)"
    ]


def test_markdown_report() -> None:
    text = render_markdown(_report())
    assert "**Result: PASS**" in text
    assert "| chat | 120 | 0 |" in text
    assert (
        "| server (API + supervisor + worker) | 121 | 10.0 | 100.0 → 101.0 (101.0) | 0.1 | 0.1 | 0.1 | 20 → 20 |"
    ) in text
    assert "19 launch/terminate cycles of `gemma-3-270m`" in text
    assert "- busy machine" in text

    failed = render_markdown(_report(errors={"chat_stream:no_done": 1}, error_samples=["chat_stream no_done: x"]))
    assert "**Result: FAIL**: 1 error(s) of kind chat_stream:no_done" in failed
    assert "| chat_stream | 150 | 1 |" in failed
    assert "- chat_stream no_done: x" in failed


def test_growth_that_levels_off_within_the_run_is_not_a_leak() -> None:
    # rises 8 MiB/min for the first four minutes (a bounded cache filling), then stays
    series = ProcessSeries(pid=9, label="model embed [9]", create_time=1.0)
    for i in range(121):
        t = i * 5.0
        series.samples.append((t, 500.0 + 8.0 * min(t, 240.0) / 60, 20))
    summary = summarize_series(series)
    assert summary["slope_after_warmup_mib_per_min"] > 1.0  # after the first fifth it was still rising
    assert summary["slope_second_half_mib_per_min"] == 0.0
    assert leak_suspects([summary], 10) == []
    assert summarize_series(_series("model chat [7]", 3.0))["slope_second_half_mib_per_min"] == pytest.approx(3.0)
