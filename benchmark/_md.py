"""Markdown helpers of the benchmark report: numbers that may be missing, and pipe tables."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["n", "pair", "table"]


def n(value: float | None, digits: int = 2, sign: bool = False) -> str:
    """``value`` with ``digits`` decimals (``+`` shown when ``sign``), ``-`` when it was not measured."""
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def pair(first: float | None, second: float | None, digits: int = 1) -> str:
    """Two figures side by side, ``raw / ours``."""
    return f"{n(first, digits)} / {n(second, digits)}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A pipe table; cells are already formatted."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
