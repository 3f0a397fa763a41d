"""The benchmarks' confidence intervals and target verdicts (benchmark/intervals.py)."""

from __future__ import annotations

import math
import random

import pytest

from benchmark.intervals import (
    Estimate,
    difference_estimate,
    format_estimate,
    judge,
    ratio_estimate,
    t_quantile,
)


def test_t_quantiles_match_the_table_and_the_normal_limit() -> None:
    assert t_quantile(1) == pytest.approx(12.706)
    assert t_quantile(6) == pytest.approx(2.447)  # 7 rounds
    assert t_quantile(30) == pytest.approx(2.042)
    assert t_quantile(31) == pytest.approx(2.0395, abs=0.001)  # the expansion continues the table
    assert t_quantile(60) == pytest.approx(2.0003, abs=0.001)
    assert t_quantile(10_000) == pytest.approx(1.96, abs=0.001)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_difference_interval_by_hand() -> None:
    # mean 2, sample sd 1 (values 1, 2, 3), n 3: half-width t(2) * 1 / sqrt(3)
    estimate = difference_estimate([1.0, 2.0, 3.0])
    assert estimate is not None
    half = 4.303 / math.sqrt(3)
    assert (estimate.value, estimate.low, estimate.high, estimate.rounds) == pytest.approx((2.0, 2 - half, 2 + half, 3))


def test_ratio_interval_is_symmetric_on_the_log_scale() -> None:
    estimate = ratio_estimate([0.9, 1.0, 1.0 / 0.9])
    assert estimate is not None
    assert estimate.value == pytest.approx(1.0)
    assert estimate.low * estimate.high == pytest.approx(1.0)  # exp(-h) * exp(h)
    assert estimate.low < 0.9 < 1 / 0.9 < estimate.high


def test_rounds_without_a_figure_are_left_out_and_bad_ratios_refused() -> None:
    estimate = ratio_estimate([None, 0.95, math.nan, 0.97])
    assert estimate is not None and estimate.rounds == 2
    assert ratio_estimate([None]) is None
    assert difference_estimate([]) is None
    with pytest.raises(ValueError):
        ratio_estimate([0.9, 0.0])


def test_one_round_has_no_interval_and_is_judged_on_its_point() -> None:
    estimate = ratio_estimate([0.97])
    assert estimate is not None and not estimate.has_interval
    assert (estimate.low, estimate.high) == (0.97, 0.97)
    assert judge(estimate, 0.98, "min") == "missed"
    assert format_estimate(estimate) == "0.970 (1 round)"


def test_judge_met_missed_and_inconclusive() -> None:
    above = Estimate(1.0, 0.99, 1.01, 7, "ratio")
    below = Estimate(0.95, 0.94, 0.96, 7, "ratio")
    straddles = Estimate(0.98, 0.96, 1.00, 7, "ratio")
    assert judge(above, 0.98, "min") == "met"
    assert judge(below, 0.98, "min") == "missed"
    assert judge(straddles, 0.98, "min") == "inconclusive"
    assert judge(Estimate(2.0, 1.0, 2.9, 7, "difference"), 3.0, "max") == "met"
    assert judge(Estimate(2.0, 1.0, 3.5, 7, "difference"), 3.0, "max") == "inconclusive"
    assert judge(Estimate(4.0, 3.5, 4.5, 7, "difference"), 3.0, "max") == "missed"
    # strict bounds: an interval touching the bound is not all on the good side
    assert judge(Estimate(0.2, 0.1, 0.3, 7, "difference"), 0.3, "max", strict=True) == "inconclusive"
    assert judge(None, 1.0, "min") == "n/a"


def test_seven_quiet_rounds_resolve_two_percent() -> None:
    """The point of issue 24: with per-round noise of ~1.5% (sd), 7 rounds pin a ratio within about ±1.5%."""
    rng = random.Random(7)
    rounds = [0.95 * math.exp(rng.gauss(0, 0.015)) for _ in range(7)]
    estimate = ratio_estimate(rounds)
    assert estimate is not None
    assert estimate.half_width < 0.02
    assert judge(estimate, 0.98, "min") == "missed"  # 0.95 is told apart from the 0.98 target


def test_coverage_is_about_95_percent() -> None:
    """Over many simulated 7-round comparisons, the interval holds the true ratio about 95% of the time."""
    rng = random.Random(1)
    true_ratio, hits, trials = 0.97, 0, 2000
    for _ in range(trials):
        estimate = ratio_estimate([true_ratio * math.exp(rng.gauss(0, 0.05)) for _ in range(7)])
        assert estimate is not None
        hits += estimate.low <= true_ratio <= estimate.high
    assert 0.93 <= hits / trials <= 0.97


def test_format_and_round_trip() -> None:
    estimate = Estimate(3.21, 1.5, 4.9, 7, "difference")
    assert format_estimate(estimate, 2, "ms", sign=True) == "+3.21 ms [+1.50, +4.90]"
    assert format_estimate(None) == "-"
    assert Estimate.from_dict(estimate.to_dict()) == estimate
    assert Estimate(1.0, 0.98, 1.02, 7, "ratio").half_width == pytest.approx(0.02)
