"""The TTS benchmark's arithmetic and report, on made-up rounds (the run itself needs a server and minutes)."""

from __future__ import annotations

from benchmark.compare_tts import TEXTS, _rtf_ratio, render_markdown, run_level, summarize


def level(rtf: float, ttfa: float) -> dict[str, float]:
    return {
        "requests": 8,
        "wall_s": rtf * 40,
        "audio_s": 40.0,
        "rtf": rtf,
        "ttfa_ms": ttfa,
        "latency_ms": 500.0,
        "rps": 8 / (rtf * 40),
    }


def test_summary_takes_medians_over_rounds_and_report_gives_ratios() -> None:
    rounds = [
        {"raw piper": {"c=1": level(0.10, 300)}, "platform": {"c=1": level(0.12, 320)}},
        {"raw piper": {"c=1": level(0.20, 100)}, "platform": {"c=1": level(0.11, 330)}},
        {"raw piper": {"c=1": level(0.15, 200)}, "platform": {"c=1": level(0.30, 310)}},
    ]
    summary = summarize(rounds)
    assert summary["raw piper"]["c=1"]["rtf"] == 0.15 and summary["platform"]["c=1"]["ttfa_ms"] == 320
    conditions = {
        "date": "d",
        "machine": "m",
        "voice": "v",
        "texts": 8,
        "words": 148,
        "rounds": 3,
        "platform_engine": "p",
        "raw": "r",
        "format": "pcm",
        "versions": {"piper-tts": "1.8.0"},
    }
    text = render_markdown({"conditions": conditions, "summary": summary})
    assert "| raw piper | c=1 | 200 / 320 | 0.150 / 0.120 |" in text and "| 0.80 | +120 |" in text


def test_run_level_counts_audio_from_pcm_bytes() -> None:
    def fake(text: str) -> tuple[float, float, int]:
        return 0.01, 0.02, 22050 * 2  # one second of 16-bit audio at 22.05 kHz

    result = run_level(fake, TEXTS, 4)
    assert result["requests"] == len(TEXTS) and result["audio_s"] == len(TEXTS)
    assert result["ttfa_ms"] == 10.0 and result["rtf"] < 1


def test_rtf_ratio_over_rounds_has_an_interval() -> None:
    rounds = [
        {"platform": {"c=1": {"rtf": ours}}, "raw piper": {"c=1": {"rtf": 0.100}}} for ours in (0.101, 0.102, 0.100)
    ]
    cell = _rtf_ratio({"rounds": rounds, "summary": {}}, "raw piper", "c=1")
    assert cell.startswith("1.01 [") and cell.endswith("]")
