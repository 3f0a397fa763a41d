"""Latency/throughput statistics for serving benchmarks.

Pure functions with no I/O so they can be unit-tested exactly and reused by
any benchmark script that produces :class:`RequestResult` records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PERCENTILES: tuple[int, ...] = (50, 90, 99)
STAT_NAMES: tuple[str, ...] = ("mean", *(f"p{p}" for p in PERCENTILES))
MAX_ERROR_SAMPLES = 5
#: Two chunks closer than this reached the client together (one write, one delivery)
DELIVERY_GAP_SECONDS = 0.0005


@dataclass
class RequestResult:
    """Timing and token accounting of one benchmark request.

    Times are in seconds. ``ttft`` is ``None`` when no content ever arrived.
    ``usage_from_chunks`` flags requests whose token counts had to be estimated
    from the number of streamed chunks because the server sent no ``usage``.
    """

    ok: bool = False
    error: str = ""
    start_time: float = 0.0
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    e2e: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_from_chunks: bool = False


def percentile(values: Sequence[float], p: float) -> float:
    """Return the ``p``-th percentile (0-100) with linear interpolation.

    Matches ``numpy.percentile``'s default ("linear") method so numbers are
    comparable with other tools. Raises ``ValueError`` on empty input because
    a percentile of nothing has no meaningful value.
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def tpot(result: RequestResult) -> float | None:
    """Time per output token after the first one, or ``None`` if undefined.

    Undefined for failed requests and for requests with fewer than two tokens,
    where no decode step follows the first token.
    """
    if not result.ok or result.ttft is None or result.completion_tokens < 2:
        return None
    return (result.e2e - result.ttft) / (result.completion_tokens - 1)


def _distribution_ms(name: str, seconds: Sequence[float]) -> dict[str, float | None]:
    """Mean and percentiles of ``seconds`` converted to ms, keyed ``<name>_<stat>``."""
    stats: dict[str, float | None] = {}
    stats[f"{name}_mean"] = sum(seconds) / len(seconds) * 1000 if seconds else None
    for p in PERCENTILES:
        stats[f"{name}_p{p}"] = percentile(seconds, p) * 1000 if seconds else None
    return stats


def _per_second(amount: float, wall_seconds: float) -> float | None:
    """Rate over the wall-clock window, ``None`` when the window is empty."""
    return amount / wall_seconds if wall_seconds > 0 else None


def _error_samples(failed: Sequence[RequestResult]) -> list[str]:
    """First distinct error texts, capped so the summary stays readable."""
    samples: list[str] = []
    for result in failed:
        if result.error not in samples:
            samples.append(result.error)
        if len(samples) == MAX_ERROR_SAMPLES:
            break
    return samples


def summarize(results: Sequence[RequestResult], wall_seconds: float) -> dict[str, Any]:
    """Aggregate per-request results of one run into a flat JSON-able dict.

    Latency statistics only use successful requests; throughputs divide by the
    run's wall-clock time (``wall_seconds``). Failed requests are counted and
    their first distinct error texts kept so failures are visible, not hidden.
    """
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    output_tokens = sum(r.completion_tokens for r in ok)
    summary: dict[str, Any] = {
        "completed": len(ok),
        "errors": len(failed),
        "error_samples": _error_samples(failed),
        "usage_from_chunks": sum(r.usage_from_chunks for r in ok),
        "wall_seconds": wall_seconds,
        "total_prompt_tokens": sum(r.prompt_tokens for r in ok),
        "total_output_tokens": output_tokens,
        "request_throughput": _per_second(len(ok), wall_seconds),
        "output_throughput": _per_second(output_tokens, wall_seconds),
    }
    summary.update(_distribution_ms("ttft_ms", [r.ttft for r in ok if r.ttft is not None]))
    tpots = [t for t in map(tpot, ok) if t is not None]
    summary.update(_distribution_ms("tpot_ms", tpots))
    summary.update(_distribution_ms("itl_ms", [gap for r in ok for gap in r.itl]))
    # Delivery gaps: the time between two separate arrivals of text. Chunks that reach the client together (a
    # server that coalesces tokens) give ITLs near zero and a misleadingly low ITL p50; the gaps between the
    # groups are what a reader sees as the stream's rhythm.
    summary.update(_distribution_ms("gap_ms", [gap for r in ok for gap in r.itl if gap > DELIVERY_GAP_SECONDS]))
    summary.update(_distribution_ms("e2e_ms", [r.e2e for r in ok]))
    return summary


def _fmt(value: float | None, digits: int = 2) -> str:
    """Render a number for the table, ``-`` for undefined values."""
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(summary: dict[str, Any]) -> str:
    """Render a :func:`summarize` dict as a short fixed-width text table."""
    lines = [
        f"{'Successful requests:':<30}{summary['completed']}",
        f"{'Failed requests:':<30}{summary['errors']}",
        f"{'Wall time (s):':<30}{_fmt(summary['wall_seconds'])}",
        f"{'Request throughput (req/s):':<30}{_fmt(summary['request_throughput'])}",
        f"{'Output throughput (tok/s):':<30}{_fmt(summary['output_throughput'])}",
        f"{'Total output tokens:':<30}{summary['total_output_tokens']}",
    ]
    if summary["usage_from_chunks"]:
        lines.append(f"{'Token counts from chunks:':<30}{summary['usage_from_chunks']} (server sent no usage)")
    header = f"{'Metric (ms)':<12}" + "".join(f"{stat:>10}" for stat in STAT_NAMES)
    lines += [header, "-" * len(header)]
    for name, label in (
        ("ttft", "TTFT"),
        ("tpot", "TPOT"),
        ("itl", "ITL"),
        ("e2e", "E2E"),
    ):
        cells = "".join(f"{_fmt(summary[f'{name}_ms_{s}']):>10}" for s in STAT_NAMES)
        lines.append(f"{label:<12}{cells}")
    for error in summary["error_samples"]:
        lines.append(f"error: {error}")
    return "\n".join(lines)
