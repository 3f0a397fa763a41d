"""The report's sections for the other engines, launches, batching and studies, and their targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmark import run_all
from benchmark.report import noise_warning, render_markdown
from benchmark.report_engines import batching_section, engines_sections, launch_section, study_section
from benchmark.targets import evaluate_targets


def level(c: int, ratio: float, added: float, cpu: float | None, foreign: float = 0.01) -> dict[str, Any]:
    raw = {"output_throughput": 30.0, "ttft_ms_p50": 80.0, "tpot_ms_p50": 33.0, "itl_ms_p50": 32.5, "itl_ms_p99": 60.0}
    ours = {**raw, "output_throughput": 30.0 * ratio, "ttft_ms_p50": 80.0 + added, "itl_ms_p50": 34.0}
    return {
        "concurrency": c,
        "raw": raw,
        "ours": ours,
        "rounds": [],
        "compare": {"output_throughput_ratio": ratio, "ttft_p50_added_ms": added, "tpot_p50_ratio": 1.02},
        "platform_cpu_ms_per_token": {"total": cpu},
        "max_foreign_share": foreign,
    }


def engine_result(ratio: float = 0.97, added: float = 6.0) -> dict[str, Any]:
    return {
        "config": {"num_prompts": 8, "max_tokens": 32, "rounds": 2, "n_parallel": 4},
        "levels": [level(1, ratio, added, 0.9), level(4, 0.99, 2.0, 0.25)],
        "problems": [],
        "prompt_tokens_equal": True,
        "launch_seconds": 65.7,
        "raw_ready_seconds": 56.8,
    }


def test_every_engine_gets_the_parity_targets_under_its_name() -> None:
    verdicts = {v.name: v for v in evaluate_targets({"engines": {"vLLM": engine_result(), "MLX": {"error": "x"}}})}
    assert verdicts["vLLM: output tok/s ours/raw, c=1"].met is False
    assert verdicts["vLLM: output tok/s ours/raw, c=4"].met is True
    assert verdicts["vLLM: TTFT p50 added, c=1"].met is False
    assert verdicts["vLLM: platform CPU per output token, c=4"].met is True
    assert not [name for name in verdicts if name.startswith("MLX")]  # a failed comparison has no figures


def test_engine_section_shows_itl_side_by_side_and_the_failed_engine() -> None:
    text = "\n".join(engines_sections({"engines": {"vLLM": engine_result(), "MLX": {"error": "no env"}}}))
    assert "### vLLM: raw engine vs platform" in text and "ITL p50 ms raw / ours" in text
    assert "32.5 / 34.0" in text and "60.0 / 60.0" in text and "launch on the platform 65.7 s" in text
    assert "### MLX: raw engine vs platform" in text and "Not measured: no env" in text


def test_launch_section_lists_each_engine_with_its_install_state() -> None:
    launches = {
        "engines": {
            "llama.cpp": {
                "install": {"status": "main environment", "seconds": None},
                "launch_seconds": 1.2,
                "first_token_seconds": 0.05,
                "model_rss_mb": 300.0,
            },
            "vLLM": {
                "install": {"status": "installed fresh", "seconds": 118.0},
                "launch_seconds": 66.0,
                "first_token_seconds": 0.4,
                "model_rss_mb": 3600.0,
            },
            "MLX": {
                "install": {"status": "not installed", "seconds": None, "installed": False},
                "skipped": "its environment is not installed",
            },
        }
    }
    text = "\n".join(launch_section(launches))
    assert "| llama.cpp | main environment | 1.20 s | 0.05 s | 300 MiB |" in text
    assert "installed fresh 118.0 s" in text and "its environment is not installed" in text


def test_batching_section_renders_whatever_levels_were_measured() -> None:
    batching = {
        "embeddings": {"c1_req_s": 40.0, "c1_tok_s": 400.0, "c16_req_s": 150.0, "c16_tok_s": 1500.0, "ratio": 3.75},
        "transformers": {
            "c1_tok_s": 20.0,
            "c4_tok_s": 50.0,
            "c8_tok_s": 70.0,
            "c16_tok_s": 90.0,
            "ratio_c8_c1": 3.5,
            "c1_errors": 0,
        },
    }
    text = "\n".join(batching_section(batching))
    assert "| workload | c=1 | c=4 | c=8 | c=16 | gain |" in text
    assert "| transformers (tok/s) | 20.0 | 50.0 | 70.0 | 90.0 | c8_c1 3.50 x |" in text
    assert "| embeddings (req/s) | 40.0 |  |  | 150.0 | gain 3.75 x |" in text
    assert "| embeddings (tok/s) | 400.0 |  |  | 1500.0 |  |" in text


def test_study_section_prefers_the_studys_own_markdown_then_its_flat_figures() -> None:
    assert "| a|b |" in "\n".join(study_section("T", {"markdown": "| a|b |"}, "x.json"))
    text = "\n".join(study_section("T", {"summary": {"workers": 100, "p99_ms": 1.2345, "runs": [1]}}, "x.json"))
    assert "| workers | 100 |" in text and "| p99_ms | 1.234 |" in text and "runs" not in text


def test_studies_are_read_from_the_output_folder(tmp_path: Path) -> None:
    (tmp_path / "scale.json").write_text(json.dumps({"summary": {"workers": 50}}))
    (tmp_path / "scale.md").write_text("# Scale\n\n```\n# not a heading\n```\n")
    (tmp_path / "defaults.json").write_text("{not json")
    studies = run_all.load_studies(tmp_path)
    assert studies["scale"]["summary"] == {"workers": 50}
    assert "could not be read" in studies["defaults"]["error"]
    assert run_all.load_studies(tmp_path / "missing") == {}
    text = "\n".join(study_section("Scale simulation", studies["scale"], "scale"))
    assert "### Scale" in text and "\n# not a heading" in text  # headings nested, code blocks untouched


def test_noise_warning_covers_the_other_engines() -> None:
    report = {"engines": {"vLLM": {"levels": [level(1, 1.0, 0.0, 0.1, foreign=0.4)]}}}
    assert "40%" in (noise_warning(report, 0.1) or "")


def test_full_report_renders_every_new_section() -> None:
    machine = {
        "date": "d",
        "cpu": "c",
        "cores": 2,
        "cores_physical": 2,
        "ram_gib": 8.0,
        "os": "Linux",
        "python": "3.11",
        "xinference": "0",
        "xllamacpp": "0",
        "xoscar": "0",
        "load_average_start": [0, 0, 0],
    }
    report = {
        "machine": machine,
        "engines": {"MLX": engine_result()},
        "scale": {"summary": {"workers": 3}},
        "engine_launch": {"engines": {}},
    }
    text = render_markdown(report)
    assert "## Other engines against their own servers" in text and "## Scale simulation" in text
    assert "MLX: output tok/s ours/raw, c=1" in text  # in the targets table and the gaps


def test_run_all_parses_engine_options() -> None:
    args = run_all.parse_args(["--engines", "MLX", "--engine-rounds", "1", "--engine-concurrency", "1,2"])
    assert args.engines == ["MLX"] and args.engine_rounds == 1 and args.engine_concurrency == [1, 2]
    assert run_all.parse_args([]).engines == ["vLLM", "MLX"]


def test_embeddings_are_judged_against_the_in_process_engine_too() -> None:
    from benchmark.targets import evaluate_targets

    def judged(ratio: float) -> bool | None:
        report = {"batching": {"embeddings": {"ratio": 2.0, "ratio_vs_inprocess": ratio}}}
        verdicts = {v.name: v for v in evaluate_targets(report)}
        return verdicts["embeddings req/s c=16, platform / in-process sentence-transformers"].met

    assert judged(0.95) is True and judged(0.85) is False
