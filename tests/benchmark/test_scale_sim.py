"""Pure parts of the scale simulation (buckets, degradation, profile lines), and one tiny real run: the real
supervisor with two stand-in workers, so the simulation's calls stay in step with the supervisor's API."""

from __future__ import annotations

import asyncio
import cProfile
from pathlib import Path

import pytest

from benchmark.scale_sim import Scale, bucket_medians, first_degradation, profile_lines, render_markdown, run_scale


def test_buckets_take_medians_of_consecutive_launches() -> None:
    buckets = bucket_medians([0.001, 0.003, 0.002, 0.010, 0.030], size=2)
    assert [b["upto"] for b in buckets] == [2, 4, 5]
    assert buckets[0]["median_ms"] == pytest.approx(2.0) and buckets[0]["max_ms"] == pytest.approx(3.0)
    assert buckets[2]["median_ms"] == pytest.approx(30.0)
    with pytest.raises(ValueError):
        bucket_medians([0.1], size=0)


def test_degradation_is_the_first_bucket_at_twice_the_first_median() -> None:
    buckets = [
        {"upto": 10, "median_ms": 5.0},
        {"upto": 20, "median_ms": 9.9},
        {"upto": 30, "median_ms": 10.0},
        {"upto": 40, "median_ms": 50.0},
    ]
    assert first_degradation(buckets) == 30
    assert first_degradation(buckets, factor=20) is None
    assert first_degradation([]) is None


def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_profile_lines_rank_by_own_time_and_name_the_function() -> None:
    profile = cProfile.Profile()
    profile.enable()
    _busy(200_000)
    profile.disable()
    lines = profile_lines(profile, top=3)
    assert len(lines) <= 3 and any("_busy" in line or "genexpr" in line for line in lines)
    assert all(" own " in line and " calls " in line for line in lines)


def test_a_tiny_cluster_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    monkeypatch.setenv("XINFERENCE_HEARTBEAT_INTERVAL", "0.2")
    report = asyncio.run(run_scale(Scale(workers=2, replicas=6, bucket=3, heartbeat_seconds=0.6)))
    assert report["launched"] == 6 and [b["upto"] for b in report["launch"]["buckets"]] == [3, 6]
    assert report["routes"]["routes"] == 6  # every launched model is routable through the real route cache
    assert report["heartbeat"]["beats"] >= 2  # both stand-ins beat at the configured interval
    page = render_markdown([report], notes="## Findings")
    assert "2 workers, 6 of 6 replicas launched" in page and page.rstrip().endswith("## Findings")


def test_an_empty_profile_has_no_lines() -> None:
    assert profile_lines(cProfile.Profile()) == []
