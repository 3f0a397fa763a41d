"""Confidence intervals over benchmark rounds, and verdicts that say "inconclusive" when the interval says so.

Every comparison here runs its sides alternately, round after round, with fresh prompts each round; each round
gives one figure (ours ÷ raw tok/s, TTFT added, c=16 ÷ c=1 req/s, ...). One round's figure moves by several
percent with the machine's mood, so a single pooled number cannot tell 0.97 from 0.99. This module turns the
per-round figures into an estimate with a 95% interval and holds the interval, not the point, against a target:

- a **ratio** (ours ÷ raw) is averaged on the log scale: the geometric mean of the rounds, with a Student-t
  interval on the mean of the logs (ratios are multiplicative: 0.9 and 1.1 are not equally far from 1 otherwise);
- a **difference** (milliseconds added) gets the plain mean and t-interval;
- :func:`judge` says ``met`` when the whole interval is on the good side of the target, ``missed`` when it is all
  on the bad side, ``inconclusive`` when it straddles the target (more rounds, or a quieter machine, would decide),
  and ``n/a`` when there is nothing to judge. With a single round there is no interval: the point decides and
  the estimate says so.

Pure functions without I/O or third-party imports (no scipy: the t quantiles are tabulated), used by every
benchmark that prints a ratio and tested in ``tests/benchmark/test_intervals.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CONFIDENCE",
    "MIN_ROUNDS",
    "Direction",
    "Estimate",
    "Outcome",
    "difference_estimate",
    "format_estimate",
    "judge",
    "ratio_estimate",
    "t_quantile",
]

#: Two-sided confidence of every interval printed by the benchmarks
CONFIDENCE = 0.95
#: Rounds a comparison runs by default: with fewer, a t-interval is too wide to resolve 2%
MIN_ROUNDS = 7

Outcome = Literal["met", "missed", "inconclusive", "n/a"]
Direction = Literal["min", "max"]

# 97.5th percentile of Student's t for 1..30 degrees of freedom (two-sided 95%)
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
_Z975 = 1.959964


def t_quantile(degrees_of_freedom: int) -> float:
    """The 97.5th percentile of Student's t (the half-width factor of a two-sided 95% interval).

    Tabulated up to 30 degrees of freedom; beyond, the Cornish-Fisher expansion around the normal quantile
    (within 0.001 of the exact value from 31 on).
    """
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {degrees_of_freedom}")
    if degrees_of_freedom <= len(_T975):
        return _T975[degrees_of_freedom - 1]
    z, n = _Z975, float(degrees_of_freedom)
    return z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)


@dataclass(frozen=True)
class Estimate:
    """A figure estimated from per-round values: the point, its 95% interval and how many rounds gave it.

    ``low == high == value`` when a single round was usable (no interval can be drawn from one value).
    """

    value: float
    low: float
    high: float
    rounds: int
    kind: Literal["ratio", "difference"]

    @property
    def has_interval(self) -> bool:
        return self.rounds >= 2

    @property
    def half_width(self) -> float:
        """Half the interval's width, relative to the value for a ratio (0.02 = ±2%), in units for a difference."""
        if self.kind == "ratio":
            return (self.high - self.low) / 2 / self.value if self.value else math.inf
        return (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "rounds": self.rounds, "kind": self.kind}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        return cls(float(data["value"]), float(data["low"]), float(data["high"]), int(data["rounds"]), data["kind"])


def _usable(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the t-interval's half-width of ``values`` (at least two)."""
    n = len(values)
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t_quantile(n - 1) * math.sqrt(variance / n)


def ratio_estimate(per_round: Sequence[float | None]) -> Estimate | None:
    """Geometric mean of per-round ratios with a t-interval on their logs; ``None`` when no round gave a ratio.

    Rounds without a figure (``None``, NaN) are left out; a ratio <= 0 is not a ratio of two rates and raises.
    """
    values = _usable(per_round)
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError(f"ratios must be > 0, got {values}")
    logs = [math.log(v) for v in values]
    if len(logs) == 1:
        return Estimate(values[0], values[0], values[0], 1, "ratio")
    mean, half = _mean_interval(logs)
    return Estimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), "ratio")


def difference_estimate(per_round: Sequence[float | None]) -> Estimate | None:
    """Mean of per-round differences with its t-interval; ``None`` when no round gave one."""
    values = _usable(per_round)
    if not values:
        return None
    if len(values) == 1:
        return Estimate(values[0], values[0], values[0], 1, "difference")
    mean, half = _mean_interval(values)
    return Estimate(mean, mean - half, mean + half, len(values), "difference")


def judge(estimate: Estimate | None, bound: float, direction: Direction, strict: bool = False) -> Outcome:
    """Hold ``estimate`` against a target: ``direction="min"`` wants the figure >= ``bound`` (``>`` if ``strict``),
    ``"max"`` wants it <= ``bound`` (``<`` if ``strict``).

    ``met``/``missed`` when the whole interval is on one side, ``inconclusive`` when the bound lies inside it. A
    single-round estimate (no interval) is judged on its point.
    """
    if estimate is None:
        return "n/a"

    def good(v: float) -> bool:
        if direction == "min":
            return v > bound if strict else v >= bound
        return v < bound if strict else v <= bound

    low_good, high_good = good(estimate.low), good(estimate.high)
    if low_good and high_good:
        return "met"
    if not low_good and not high_good:
        return "missed"
    return "inconclusive"


def format_estimate(estimate: Estimate | None, digits: int = 3, unit: str = "", sign: bool = False) -> str:
    """``0.963 [0.941, 0.985]`` (a single round: ``0.963 (1 round)``); ``-`` for no estimate."""
    if estimate is None:
        return "-"
    number = "{:+.{d}f}" if sign else "{:.{d}f}"
    suffix = f" {unit}" if unit else ""
    point = number.format(estimate.value, d=digits) + suffix
    if not estimate.has_interval:
        return f"{point} (1 round)"
    return f"{point} [{number.format(estimate.low, d=digits)}, {number.format(estimate.high, d=digits)}]"
