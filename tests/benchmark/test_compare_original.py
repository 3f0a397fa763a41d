"""The side-by-side with the original Xinference: install commands, its custom-model JSON, the three-sided summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmark.compare_engine import RunRecord, Step
from benchmark.compare_original import (
    SIDES,
    custom_family,
    envs_dir,
    install_commands,
    parse_args,
    render_markdown,
    summarize_sides,
)
from benchmark.stats import RequestResult


def records(rates: dict[str, list[float]]) -> list[RunRecord]:
    """One c=1 run per side per round; side s in round i makes 100 tokens in 100/rates[s][i] seconds."""
    out = []
    for side, per_round in rates.items():
        for index, rate in enumerate(per_round):
            wall = 100 / rate
            results = [RequestResult(ok=True, ttft=0.05, e2e=wall, completion_tokens=100, prompt_tokens=10)]
            out.append(RunRecord(Step(index, 1, side), results, wall, {"server": 0.2}))
    return out


def original_result() -> dict[str, Any]:
    levels = summarize_sides(
        records({"raw": [100.0, 100.0, 100.0], "ours": [99.0, 98.0, 100.0], "original": [80.0, 82.0, 81.0]}), [1]
    )
    return {
        "conditions": {
            "version": "4.1.0",
            "rounds": 3,
            "concurrency": [1],
            "num_prompts": 1,
            "max_tokens": 100,
            "engine_settings": {"n_ctx": 8192, "n_parallel": 4, "n_threads": 2},
            "original_ready_seconds": 40.0,
            "original_launch_seconds": 20.0,
            "date": "2026-01-01 00:00 UTC",
            "cores": 2,
        },
        "levels": levels,
    }


def test_summary_gives_each_side_and_its_ratio_to_raw_per_round() -> None:
    (level,) = original_result()["levels"]
    assert set(level["sides"]) == set(SIDES)
    assert level["sides"]["raw"]["output_throughput"] == pytest.approx(100.0)
    assert level["sides"]["original"]["cpu_ms_per_token"] == pytest.approx(0.2 * 3 * 1000 / 300)
    original = level["intervals"]["original_throughput_ratio"]
    assert original["rounds"] == 3 and original["value"] == pytest.approx((0.80 * 0.82 * 0.81) ** (1 / 3))
    assert original["low"] < original["value"] < original["high"]
    assert level["intervals"]["ours_ttft_p50_added_ms"]["value"] == pytest.approx(0.0)


def test_markdown_table_and_error() -> None:
    text = render_markdown(original_result())
    assert "`xinference==4.1.0` (PyPI)" in text and "| 1 | 100.0 / 99.0 / 81.0 |" in text
    assert "original ÷ raw" in text
    assert render_markdown({"error": "pip: no matching torch"}).endswith("Not measured: pip: no matching torch\n")


def test_install_pins_torch_through_the_constraints(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    commands = install_commands(tmp_path / "venv", "4.1.0", constraints)
    assert commands[0] == [sys.executable, "-m", "venv", str(tmp_path / "venv")]
    pip = commands[-1]
    assert pip[pip.index("-c") + 1] == str(constraints) and "xinference==4.1.0" in pip and "xllamacpp" in pip
    repo_constraints = Path(__file__).resolve().parents[2] / "constraints.txt"
    assert "torch==2.13.0" in repo_constraints.read_text()


def test_envs_dir_follows_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))
    assert envs_dir() == tmp_path
    monkeypatch.delenv("XINFERENCE_ENVS_DIR")
    assert envs_dir() == Path.home() / ".cache" / "xinference" / "envs"


def test_custom_family_points_at_the_gguf_and_keeps_its_template(tmp_path: Path) -> None:
    family = custom_family(tmp_path / "m.Q4_1.gguf", 4096)
    (spec,) = family["model_specs"]
    assert spec["model_uri"] == f"file://{tmp_path}" and spec["model_file_name_template"] == "m.Q4_1.gguf"
    assert spec["model_format"] == "ggufv2" and spec["quantization"] == "Q4_1"
    assert family["chat_template"] == "" and family["context_length"] == 4096 and family["version"] == 2


def test_arguments() -> None:
    args = parse_args(["--rounds", "2", "--concurrency", "1,4", "--no-install"])
    assert args.config.rounds == 2 and args.config.concurrency == (1, 4) and not args.config.install
    with pytest.raises(SystemExit):
        parse_args(["--rounds", "0"])
