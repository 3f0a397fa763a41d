"""Pooling compare_engine runs taken at different times (benchmark/pool_runs.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmark.pool_runs import main, pool_metric, pool_runs


def _report(levels: dict[int, list[float]], cpu: float = 0.4) -> dict[str, Any]:
    return {
        "levels": [
            {
                "concurrency": c,
                "rounds": [
                    {"round": i, "output_throughput_ratio": r, "platform_cpu_ms_per_token": cpu + 0.01 * i}
                    for i, r in enumerate(ratios)
                ],
            }
            for c, ratios in levels.items()
        ]
    }


def test_runs_that_exclude_each_other_are_flagged_and_the_between_runs_interval_holds_both() -> None:
    high = [1.08, 1.10, 1.09, 1.07, 1.09, 1.08, 1.10]
    low = [0.93, 0.94, 0.92, 0.93, 0.95, 0.93, 0.94]
    figure = pool_metric([high, low], "ratio")
    assert figure is not None
    first, second = figure["per_run"]
    assert first.low > second.high  # each run's own interval is tight, and they miss each other
    assert figure["disagree"]
    between, every = figure["between_runs"], figure["all_rounds"]
    assert between.rounds == 2 and every.rounds == 14
    assert between.low < second.value and between.high > first.value
    assert math.isclose(between.value, math.sqrt(first.value * second.value))
    assert (between.high - between.low) > (every.high - every.low)  # the drift makes it wider, as it should


def test_runs_that_agree_are_not_flagged() -> None:
    figure = pool_metric([[0.98, 1.01, 0.99, 1.02], [1.00, 0.99, 1.01, 1.00], [0.97, 1.02, 1.00, 0.99]], "ratio")
    assert figure is not None and not figure["disagree"]
    assert figure["between_runs"].low < 1.0 < figure["between_runs"].high


def test_differences_pool_arithmetically_and_rounds_without_a_value_are_left_out() -> None:
    figure = pool_metric([[0.3, 0.5, None], [0.6, 0.8]], "difference")
    assert figure is not None
    assert [e.value for e in figure["per_run"]] == pytest.approx([0.4, 0.7])
    assert figure["between_runs"].value == pytest.approx(0.55)
    assert figure["all_rounds"].value == pytest.approx(0.55) and figure["all_rounds"].rounds == 4
    assert pool_metric([[None], []], "difference") is None


def test_levels_pool_over_the_runs_that_have_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _report({1: [1.0, 1.02, 0.98], 4: [0.95, 0.97, 0.96]})
    two = _report({1: [1.01, 0.99, 1.0]})
    pooled = pool_runs([one, two], ["output_throughput_ratio"])
    assert set(pooled) == {1, 4}
    assert len(pooled[1]["output_throughput_ratio"]["per_run"]) == 2
    assert len(pooled[4]["output_throughput_ratio"]["per_run"]) == 1
    paths = []
    for index, report in enumerate((one, two)):
        path = tmp_path / f"run{index}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    assert main(paths) == 0
    out = capsys.readouterr().out
    assert "c=1" in out and "c=4" in out and "between runs" in out and "platform_cpu_ms_per_token" in out
