"""Install stages that begin and end between two polls still reach the user (CI once saw ``[resolving]`` skipped:
a resolve from pip's cache takes milliseconds, the command line polls every second)."""

from __future__ import annotations

import pytest

from xinference.cli.engines import _echo_progress
from xinference.core.env_jobs import _Job
from xinference.engines.envs import InstallProgress


def test_the_job_keeps_every_stage_once_in_order() -> None:
    job = _Job("MLX")
    for stage, message in (
        ("queued", ""),
        ("creating", "creating the env"),
        ("resolving", "Collecting mlx"),
        ("resolving", "Collecting mlx-lm"),
        ("downloading", "Downloading mlx"),
        ("done", "MLX installed"),
    ):
        job.record(InstallProgress("MLX", stage, message).to_dict())
    assert [s["stage"] for s in job.stages] == ["queued", "creating", "resolving", "downloading", "done"]
    assert job.stages[2]["message"] == "Collecting mlx"  # the stage's first line, not its last
    assert job.progress["stage"] == "done"


def test_the_cli_prints_stages_it_never_polled(capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, int] = {}
    first = {"worker": "w1", "stages": [{"stage": "queued", "message": ""}]}
    later = {
        "worker": "w1",
        "stages": [
            {"stage": "queued", "message": ""},
            {"stage": "resolving", "message": "Collecting mlx"},
            {"stage": "done", "message": "MLX installed"},
        ],
    }
    for status in (first, first, later, later):
        _echo_progress(status, seen)
    assert capsys.readouterr().out.splitlines() == [
        "w1: [queued]",
        "w1: [resolving] Collecting mlx",
        "w1: [done] MLX installed",
    ]
