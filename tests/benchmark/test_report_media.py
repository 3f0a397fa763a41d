"""The audio, image and original-Xinference parts of ``results/latest.md``: verdicts, sections, run_all's flags."""

from __future__ import annotations

from typing import Any

import pytest

from benchmark.compare_images import OURS as IMAGE_OURS
from benchmark.compare_images import RAW as IMAGE_RAW
from benchmark.compare_images import summarize_rounds
from benchmark.run_all import evaluate_targets, parse_args, render_markdown


def machine() -> dict[str, Any]:
    return {
        "date": "2026-01-01 00:00 UTC",
        "cpu": "Test CPU",
        "cores": 2,
        "cores_physical": 2,
        "ram_gib": 24.0,
        "os": "Linux",
        "python": "3.11",
        "xinference": "0.1.0",
        "xllamacpp": "1",
        "xoscar": "0.12.2",
    }


def stt_result(ratios: list[float]) -> dict[str, Any]:
    """compare_stt's result with one level; round i's platform req/s is ``ratios[i]`` times raw's."""
    rounds = [
        {
            "raw faster-whisper": {"c=1": {"rps": 2.0, "rtf": 0.05, "latency_ms": 400.0}},
            "platform": {"c=1": {"rps": 2.0 * r, "rtf": 0.05 / r, "latency_ms": 400.0 / r}},
        }
        for r in ratios
    ]
    return {
        "conditions": {
            "model": "whisper-tiny.en",
            "settings": {"compute_type": "int8", "beam_size": 5},
            "requests": 2,
            "words_per_round": 30,
            "rounds": len(ratios),
            "raw": "WhisperModel in-process",
        },
        "rounds": rounds,
        "summary": {
            "raw faster-whisper": {"c=1": {"rps": 2.0, "rtf": 0.05, "latency_ms": 400.0}},
            "platform": {"c=1": {"rps": 2.0, "rtf": 0.05, "latency_ms": 400.0}},
        },
        "agreement": 0.9,
    }


def tts_result(ratios: list[float]) -> dict[str, Any]:
    """compare_tts's result with one level; round i's platform RTF is raw piper's divided by ``ratios[i]``."""
    raw = {"rtf": 0.08, "ttfa_ms": 300.0, "rps": 2.0}
    rounds = [
        {"raw piper": {"c=1": raw}, "raw piper 1 thread": {"c=1": raw}, "platform": {"c=1": {**raw, "rtf": 0.08 / r}}}
        for r in ratios
    ]
    return {
        "conditions": {
            "voice": "joe",
            "texts": 4,
            "words": 40,
            "rounds": len(ratios),
            "platform_engine": "piper",
            "raw": "PiperVoice.load defaults",
        },
        "rounds": rounds,
        "summary": {"raw piper": {"c=1": raw}, "raw piper 1 thread": {"c=1": raw}, "platform": {"c=1": raw}},
    }


def images_result(raw_s: list[float], ours_s: list[float]) -> dict[str, Any]:
    rounds = [
        {
            IMAGE_RAW: {"seconds_per_image": r, "cpu_seconds_per_image": r * 2, "digests": ["a"]},
            IMAGE_OURS: {"seconds_per_image": o, "cpu_seconds_per_image": o * 2 + 0.01, "digests": ["a"]},
        }
        for r, o in zip(raw_s, ours_s, strict=True)
    ]
    return {
        "conditions": {
            "pipeline": "tiny SD",
            "size": 64,
            "steps": 4,
            "guidance_scale": 5.0,
            "threads": 2,
            "images": 1,
            "rounds": len(rounds),
        },
        "rounds": rounds,
        "summary": summarize_rounds(rounds),
    }


def report(**parts: Any) -> dict[str, Any]:
    return {"machine": machine(), **parts}


STEADY = [1.0, 1.01, 0.995, 1.005, 1.0, 0.998, 1.002]


def test_audio_and_images_are_judged_on_their_intervals() -> None:
    data = report(
        audio={"stt": stt_result(STEADY), "tts": tts_result([0.9, 0.91, 0.89, 0.9, 0.9, 0.905, 0.895])},
        images=images_result([0.50] * 7, [0.50, 0.49, 0.52, 0.55, 0.47, 0.51, 0.53]),
    )
    verdicts = {v.name: v for v in evaluate_targets(data)}
    stt = verdicts["speech to text req/s ours/raw faster-whisper, c=1"]
    assert stt.status == "met" and stt.rounds == 7 and stt.interval is not None
    assert stt.interval[0] > 0.98 and stt.target == ">= 0.98"
    assert verdicts["text to speech audio/s ours/raw piper, c=1"].status == "MISSED"
    images = verdicts["images/s ours/raw diffusers (tiny pipeline)"]
    assert images.status == "inconclusive"  # 0.98 lies inside the interval of these noisy rounds
    assert "tiny random pipeline" in images.detail and "ms per image" in images.detail


def test_images_summary_ratio_added_time_and_same_images() -> None:
    result = images_result([0.5, 0.4], [0.55, 0.44])
    summary = result["summary"]
    assert summary["images_per_second_ratio"]["value"] == pytest.approx((0.5 / 0.55 * 0.4 / 0.44) ** 0.5)
    assert summary["added_ms_per_image"]["value"] == pytest.approx(45.0)
    assert summary["seconds_per_image"] == {IMAGE_RAW: pytest.approx(0.45), IMAGE_OURS: pytest.approx(0.495)}
    assert summary["same_image_share"] == 1.0
    assert summary["cpu_seconds_per_image"] == {IMAGE_RAW: pytest.approx(0.9), IMAGE_OURS: pytest.approx(1.0)}


def test_sections_render_the_figures_and_say_what_images_measure() -> None:
    data = report(
        audio={"stt": stt_result(STEADY), "tts": tts_result(STEADY)},
        images=images_result([0.5] * 7, [0.5] * 7),
    )
    text = render_markdown(data)
    assert "## Speech to text vs raw faster-whisper" in text and "Same transcript on both sides: 90%" in text
    assert "## Text to speech vs raw piper" in text and "| raw piper 1 thread | c=1 |" in text
    assert "## Image generation vs the raw diffusers pipeline" in text
    assert "platform's overhead per image" in text and "not a model's speed" in text
    assert "| 0.500 / 0.500 | 1.000 / 1.010 |" in text  # seconds, then CPU seconds per image
    assert "| speech to text req/s ours/raw faster-whisper, c=1 | 1.001 x [" in text
    assert "none: every measured target is met" in text


def test_a_failed_part_is_shown_with_its_error_and_not_judged() -> None:
    data = report(
        audio={"stt": {"error": "RuntimeError: no whisper"}, "tts": tts_result(STEADY)}, images={"error": "boom"}
    )
    verdicts = {v.name: v for v in evaluate_targets(data)}
    assert verdicts["speech to text req/s ours/raw faster-whisper"].status == "n/a"
    assert verdicts["images/s ours/raw diffusers (tiny pipeline)"].detail == "boom"
    text = render_markdown(data)
    assert "Not measured: RuntimeError: no whisper" in text and "Not measured: boom" in text


def test_figures_added_by_other_benchmarks_are_judged_and_listed() -> None:
    figures = [
        {
            "name": "embeddings req/s ours/in-process, c=16",
            "value": 0.95,
            "estimate": {"value": 0.95, "low": 0.93, "high": 0.97, "rounds": 7, "kind": "ratio"},
            "unit": "x",
            "bound": 0.9,
            "direction": "min",
        },
        {"name": "platform CPU per token, MLX c=1", "value": 0.3, "unit": "ms", "bound": 0.1, "direction": "max"},
        {"name": "no bound: skipped", "value": 1.0, "direction": "min"},
    ]
    verdicts = {v.name: v for v in evaluate_targets(report(figures=figures))}
    assert verdicts["embeddings req/s ours/in-process, c=16"].status == "met"
    assert verdicts["embeddings req/s ours/in-process, c=16"].target == ">= 0.9"
    assert verdicts["platform CPU per token, MLX c=1"].status == "MISSED"
    assert "no bound: skipped" not in verdicts
    text = render_markdown(report(figures=figures))
    assert "| embeddings req/s ours/in-process, c=16 | 0.950 x [0.930, 0.970], 7 rounds | >= 0.9 | **met** |" in text
    assert "- platform CPU per token, MLX c=1: 0.30 ms, target <= 0.1" in text


def test_the_original_section_shows_its_table_or_why_it_did_not_run() -> None:
    from tests.benchmark.test_compare_original import original_result

    text = render_markdown(report(original=original_result()))
    assert "## Against the original Xinference" in text and "original ÷ raw" in text
    failed = render_markdown(report(original={"error": "pip failed", "conditions": {"version": "4.1.0"}}))
    assert "`xinference==4.1.0` not measured: pip failed" in failed


def test_run_all_flags() -> None:
    default = parse_args([])
    assert not default.skip_audio and not default.skip_images and not default.with_original
    assert default.audio_rounds >= 7 and default.image_rounds >= 7 and default.audio_levels == [1, 4]
    assert default.original_version == "4.1.0"
    args = parse_args(["--skip-audio", "--skip-images", "--with-original", "--original-version", "4.0.0"])
    assert args.skip_audio and args.skip_images and args.with_original and args.original_version == "4.0.0"
    assert parse_args(["--audio-rounds", "3", "--audio-levels", "1"]).audio_levels == [1]
    for bad in (["--audio-rounds", "0"], ["--image-rounds", "x"], ["--audio-levels", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
