"""The speech-to-text benchmark's arguments, arithmetic and report, on made-up rounds (the run itself needs a
server, the model and minutes)."""

from __future__ import annotations

import io
import wave

import pytest

from benchmark.compare_stt import (
    OURS,
    RAW,
    SENTENCES,
    Clip,
    agreement,
    parse_args,
    ratios,
    render_markdown,
    round_texts,
    run_level,
    same_settings,
    summarize,
)


def level(rtf: float, transcripts: list[str] | None = None) -> dict[str, object]:
    return {
        "requests": 4,
        "wall_s": rtf * 20,
        "audio_s": 20.0,
        "rtf": rtf,
        "latency_ms": rtf * 5000,
        "rps": 4 / (rtf * 20),
        "transcripts": transcripts or ["a", "b", "c", "d"],
    }


def silence(seconds: float, rate: int = 22050) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0" * int(seconds * rate))
    return buffer.getvalue()


def test_arguments_default_to_seven_rounds_at_c1_and_c4_and_refuse_nonsense() -> None:
    args = parse_args([])
    assert (args.rounds, args.levels, args.requests) == (7, [1, 4], 4)
    assert parse_args(["--levels", "2,8", "--rounds", "7"]).levels == [2, 8]
    for bad in (["--rounds", "0"], ["--levels", "0,4"], ["--requests", "0"], ["--levels", ","]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_each_round_speaks_different_texts_and_a_rerun_the_same() -> None:
    rounds = [round_texts(index, 4) for index in range(5)]
    assert all(len(texts) == 4 for texts in rounds)
    assert len({tuple(texts) for texts in rounds}) == 5  # fresh audio every round
    assert round_texts(3, 4) == rounds[3]
    for text in rounds[0]:
        parts = [s for s in SENTENCES if s in text]
        assert 2 <= len(parts) <= 3 and len(set(parts)) == len(parts)


def test_summary_ratios_spread_and_report() -> None:
    rounds = [
        {RAW: {"c=1": level(0.10)}, OURS: {"c=1": level(0.12)}},
        {RAW: {"c=1": level(0.20)}, OURS: {"c=1": level(0.11, ["A ", "b", "x", "d"])}},
        {RAW: {"c=1": level(0.15)}, OURS: {"c=1": level(0.30)}},
    ]
    summary = summarize(rounds)
    assert summary[RAW]["c=1"]["rtf"] == 0.15 and summary[OURS]["c=1"]["rtf"] == 0.12
    assert "transcripts" not in summary[OURS]["c=1"]
    spread = ratios(rounds, "rtf")["c=1"]
    assert spread["median"] == pytest.approx(1.2)
    assert spread["min"] == pytest.approx(0.55) and spread["max"] == pytest.approx(2.0)
    assert ratios(rounds, "rps")["c=1"]["median"] == pytest.approx(1 / 1.2)
    assert agreement(rounds) == pytest.approx(11 / 12)  # case and spaces aside; one differs
    conditions = {
        "date": "d",
        "machine": "m",
        "model": "whisper-tiny.en",
        "settings": {"compute_type": "int8", "beam_size": 5},
        "requests": 4,
        "words_per_round": 60,
        "rounds": 3,
        "audio": "a",
        "platform_engine": "p",
        "raw": "r",
        "versions": {"faster-whisper": "1.2.1"},
    }
    result = {
        "conditions": conditions,
        "summary": summary,
        "ratios": {"rtf": ratios(rounds, "rtf"), "rps": ratios(rounds, "rps")},
        "agreement": agreement(rounds),
    }
    text = render_markdown(result)
    row = "| c=1 | 0.150 / 0.120 | 1.33 / 1.67 | 750 / 600 | 1.10 [0.22, 5.52] (0.55–2.00) | "
    assert row + "0.91 [0.18, 4.58] (0.50–1.82) |" in text
    assert "compute_type int8, beam_size 5" in text and "92% of requests" in text


def test_run_level_measures_audio_seconds_from_the_wav_files() -> None:
    clips = [Clip("one", silence(1.5)), Clip("two", silence(2.5))]
    assert [clip.seconds for clip in clips] == [1.5, 2.5]

    def fake(clip: Clip) -> tuple[float, str]:  # a stand-in for a transcription: no model runs here
        return 0.05, clip.text

    result = run_level(fake, clips, 4)
    assert result["requests"] == 2 and result["audio_s"] == 4.0 and result["transcripts"] == ["one", "two"]
    assert result["latency_ms"] == pytest.approx(50.0) and result["rtf"] < 1


def test_raw_side_takes_the_settings_the_platform_reports() -> None:
    local = {"compute_type": "int8", "num_workers": 1, "cpu_threads": 2, "beam_size": 5, "device": "cpu"}
    served = {"compute_type": "int8", "num_workers": 2, "cpu_threads": 1, "beam_size": 5, "device": "cpu"}
    assert same_settings(local, served) == {
        "compute_type": "int8",
        "num_workers": 2,
        "cpu_threads": 1,
        "beam_size": 5,
        "device": "cpu",
    }
    assert same_settings(local, {})["cpu_threads"] == 2
    with pytest.raises(RuntimeError, match="this comparison is for cpu"):
        same_settings(local, {"device": "cuda"})
    on_gpu = same_settings(local, {"device": "cuda", "compute_type": "float16"}, "cuda")
    assert on_gpu["device"] == "cuda" and on_gpu["compute_type"] == "float16"
    with pytest.raises(RuntimeError, match="this comparison is for cuda"):
        same_settings(local, {"device": "cpu"}, "cuda")
