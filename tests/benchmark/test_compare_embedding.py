"""The pure parts of the embedding-engine comparison: medians over rounds, ratios to sentence-transformers, the
page. No server is started."""

from __future__ import annotations

import pytest

from benchmark.compare_embedding import SIDES, ratios, render_markdown, round_ratios, summarize_rounds

ROUNDS = {
    "sentence_transformers": [
        {"c1_req_s": 40.0, "c1_tok_s": 1000.0, "c16_req_s": 60.0, "c16_tok_s": 1500.0},
        {"c1_req_s": 50.0, "c1_tok_s": 1200.0, "c16_req_s": 70.0, "c16_tok_s": 1700.0},
        {"c1_req_s": 44.0, "c1_tok_s": 1100.0, "c16_req_s": 66.0, "c16_tok_s": 1600.0},
    ],
    "llama.cpp f16": [
        {"c1_req_s": 22.0, "c1_tok_s": 550.0, "c16_req_s": 33.0, "c16_tok_s": 800.0},
        {"c1_req_s": 20.0, "c1_tok_s": 500.0, "c16_req_s": 30.0, "c16_tok_s": 700.0},
        {"c1_req_s": 24.0, "c1_tok_s": 600.0, "c16_req_s": 36.0, "c16_tok_s": 900.0},
    ],
}


def test_medians_and_ratios() -> None:
    summary = summarize_rounds(ROUNDS)
    assert summary["sentence_transformers"]["c1_req_s"] == 44.0
    assert summary["llama.cpp f16"]["c16_req_s"] == 33.0
    relative = ratios(summary)
    assert set(relative) == {"llama.cpp f16"}
    assert relative["llama.cpp f16"]["c1_req_s"] == pytest.approx(0.5)
    assert relative["llama.cpp f16"]["c16_req_s"] == pytest.approx(0.5)


def test_page_says_the_conditions_and_the_ratios() -> None:
    report = {
        "rounds": ROUNDS,
        "levels": [1, 16],
        "requests_per_level": 96,
        "cosine_vs_sentence_transformers": {"sentence_transformers": 1.0, "llama.cpp f16": 0.99999},
        "conditions": {
            "date": "2026-12-03 13:00 UTC",
            "cpu_cores": 2,
            "load_average_after": [3.1, 2.0, 1.5],
            "machine": "Linux x86_64",
        },
    }
    page = render_markdown(report)
    assert "2 cores shared" in page and "3.1, 2.0, 1.5" in page and "over 3 rounds" in page
    assert "| llama.cpp f16 | 22.0 | 550 | 33.0 | 800 | 0.999990 |" in page
    (line,) = [line for line in page.splitlines() if line.startswith("- llama.cpp f16: c=1 0.50x")]
    # c=1 per-round ratios 22/40, 20/50, 24/44: geometric mean 0.49, a wide interval over 3 rounds
    assert line == "- llama.cpp f16: c=1 0.50x, 0.49 [0.31, 0.77], c=16 0.50x, 0.50 [0.35, 0.72]"
    assert "- llama.cpp f16: c=1 22.0, 20.0, 24.0; c=16 33.0, 30.0, 36.0" in page


def test_the_sides_launch_the_same_model_on_each_engine() -> None:
    engines = {side.launch["model_engine"] for side in SIDES}
    assert engines == {"sentence_transformers", "llama.cpp"}
    assert {side.launch.get("quantization") for side in SIDES if side.launch["model_engine"] == "llama.cpp"} == {
        "F16",
        "F32",
    }
    assert len({side.uid for side in SIDES}) == len(SIDES)


def test_round_ratios_pair_the_sides_round_by_round() -> None:
    got = round_ratios(ROUNDS, "c1_req_s")
    assert list(got) == ["llama.cpp f16"]
    assert got["llama.cpp f16"] == [pytest.approx(22 / 40), pytest.approx(20 / 50), pytest.approx(24 / 44)]
