"""How ``xinference`` commands print: plain-text tables, byte sizes, and a one-line progress bar on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

__all__ = ["ProgressBar", "format_table", "human_size"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain left-aligned columns separated by two spaces; ``None`` cells show as ``-``."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[col]) for row in cells) for col in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def human_size(size: int) -> str:
    """``2048`` -> ``"2.0 KiB"``; bytes under 1 KiB stay whole, anything from 1 GiB up is shown in GiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


class ProgressBar:
    """One ``\\r``-redrawn line on stderr, ``Downloading [#####-----]  42.0%``; drawn only once :meth:`draw` is
    called, so a launch that downloads nothing prints nothing."""

    width = 40

    def __init__(self, label: str = "Downloading") -> None:
        self.label = label
        self.drawn = False
        self.fraction = 0.0

    def draw(self, fraction: float, extra: str = "") -> None:
        self.drawn, self.fraction = True, fraction
        done = int(fraction * self.width)
        click.echo(
            f"\r{self.label} [{'#' * done}{'-' * (self.width - done)}] {fraction * 100:5.1f}% {extra:<24}",
            nl=False,
            err=True,
        )
