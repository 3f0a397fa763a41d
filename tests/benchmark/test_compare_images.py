"""Seconds per image through the platform against the raw diffusers pipeline: arguments, prompts, and a smoke run
end to end on the tiny pipeline (it starts a server: slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.compare_images import (
    OURS,
    RAW,
    SMOKE,
    ImageConfig,
    parse_args,
    render_markdown,
    round_prompts,
    run_comparison,
)


def test_each_round_draws_fresh_prompts_and_a_rerun_the_same() -> None:
    first, second = round_prompts(0, 3), round_prompts(1, 3)
    assert first != second and round_prompts(0, 3) == first
    assert all(set(p) <= set("abcdefghijklmnopqrstuvwxyz ") for p in first + second)  # the tokenizer's letters


def test_arguments_and_their_limits() -> None:
    default = parse_args([])
    assert default.config == ImageConfig() and default.config.rounds >= 7
    assert parse_args(["--smoke"]).config == SMOKE
    assert parse_args(["--size", "96", "--steps", "2"]).config.size == 96
    for bad in (["--size", "100"], ["--size", "32"], ["--rounds", "0"], ["--steps", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


@pytest.mark.slow
def test_smoke_run_end_to_end_on_the_tiny_pipeline(tmp_path: Path) -> None:
    pytest.importorskip("diffusers")
    result = run_comparison(SMOKE, cache=tmp_path, log=lambda _line: None)
    assert len(result["rounds"]) == SMOKE.rounds
    summary = result["summary"]
    assert summary["seconds_per_image"][RAW] > 0 and summary["seconds_per_image"][OURS] > 0
    assert summary["images_per_second_ratio"]["rounds"] == SMOKE.rounds
    assert summary["same_image_share"] == 1.0  # same seed, same pipeline: the same pixels on both sides
    assert "tiny and random" in render_markdown(result)
