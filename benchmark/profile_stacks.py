"""Where a profiled process spends its time, from py-spy's collapsed stacks, per generated token.

Used by :mod:`benchmark.compare_engine` when ``--profile`` is on: one extra, unmeasured run of the platform is
sampled by ``py-spy record --format raw --gil`` and the result is reduced here to the top functions by self and
inclusive time, in microseconds per output token (the unit of the platform's CPU budget).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["hot_spots"]


def hot_spots(collapsed: str, rate_hz: float, tokens: int, top: int = 8) -> dict[str, Any]:
    """Busy time from py-spy's collapsed stacks (``frame;frame;... count``): total, self-time and inclusive tops.

    Frames are ``function (file:line)``; a function is counted once per stack for the inclusive figure. Times are
    per generated token, in microseconds, so they compare directly with the per-token budget.
    """
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
        for name in set(frames):
            incl_counts[name] = incl_counts.get(name, 0) + count

    def per_token_us(samples: int) -> float | None:
        return samples / rate_hz * 1e6 / tokens if tokens else None

    def ranked(counts: dict[str, int]) -> list[dict[str, Any]]:
        best = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
        return [{"function": name, "share": n / total, "us_per_token": per_token_us(n)} for name, n in best]

    return {
        "busy_samples": total,
        "busy_us_per_token": per_token_us(total),
        "self": ranked(self_counts) if total else [],
        "inclusive": ranked(incl_counts) if total else [],
    }


def _frame_name(frame: str) -> str:
    """``function (path/to/file.py:12)`` → ``function (file.py)``: lines differ per sample, files matter."""
    name, _, where = frame.partition(" (")
    file = where.rstrip(")").rsplit(":", 1)[0]
    short = "/".join(Path(file).parts[-2:]) if file else ""
    return f"{name} ({short})" if short else name
