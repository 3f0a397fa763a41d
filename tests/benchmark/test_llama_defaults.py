"""Pure parts of the llama.cpp defaults sweep and its GPU variant: the grid, the workload's messages, medians,
scores and the result page. No server is started."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmark import _raw_server
from benchmark.llama_defaults import (
    SYSTEM_PROMPT,
    Grid,
    LlamaConfig,
    _ExtendedSettings,
    build_grid,
    median_metrics,
    pick_best,
    render_markdown,
    round_order,
    run_metrics,
    session_messages,
    user_questions,
)
from benchmark.stats import RequestResult

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gpu_llama_defaults  # noqa: E402


def test_the_grid_crosses_layout_and_slots_then_varies_one_option_at_a_time() -> None:
    configs = build_grid()
    names = [c.name for c in configs]
    assert len(names) == len(set(names)) == 11
    assert names.count("np=1") == 1  # one slot: unified and per-slot are the same layout
    assert {("unified np=4"), "per-slot np=4", "unified np=8", "per-slot np=2"} <= set(names)
    by_name = {c.name: c for c in configs}
    assert by_name["per-slot np=4 no cache_ram"].extra_args() == ["--cache-ram", "0"]
    assert by_name["per-slot np=4 batch=256/128"].extra_args() == ["--n-batch", "256", "--n-ubatch", "128"]
    assert by_name["per-slot np=4 no cache_prompt"].cache_prompt is False
    assert by_name["unified np=4"].extra_args() == []  # llama.cpp's own values for everything not swept
    with pytest.raises(ValueError):
        build_grid(Grid(n_parallels=(2, 4), base_parallel=8))


def test_a_config_reaches_the_raw_server_as_its_arguments() -> None:
    config = LlamaConfig(
        "x", kv_unified=False, n_parallel=8, n_batch=512, n_ubatch=256, cache_reuse=256, cache_ram_mib=0
    )
    settings = config.settings(n_ctx=4096, threads=2)
    args = _ExtendedSettings(**settings.as_dict(), extra=tuple(config.extra_args())).to_args()
    parsed = _raw_server.parse_args(["--model", "m.gguf", *args])
    assert (parsed.n_parallel, parsed.kv_unified, parsed.n_batch, parsed.n_ubatch) == (8, False, 512, 256)
    assert (parsed.cache_reuse, parsed.cache_ram) == (256, 0)


def test_every_configuration_takes_every_position_across_rounds() -> None:
    names = ["a", "b", "c"]
    orders = [round_order(names, r) for r in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert {order.index("a") for order in orders} == {0, 1, 2}
    assert round_order([], 4) == []


def test_the_second_turn_repeats_the_first_after_the_shared_system_prompt() -> None:
    first, second = session_messages("q1", "q2", 1), session_messages("q1", "q2", 2)
    assert first == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "q1"}]
    assert second[:2] == first and [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"] == "q2"
    with pytest.raises(ValueError):
        session_messages("q1", "q2", 3)
    assert len(SYSTEM_PROMPT.split()) > 200  # ~300 tokens


def test_user_turns_are_fresh_each_round() -> None:
    one, other = user_questions(4, 2, seed=1), user_questions(4, 2, seed=2)
    assert len(one) == 4 and all(len(sessions) == 2 for sessions in one)
    assert one != other and user_questions(4, 2, seed=1) == one


def _result(ttft: float, tokens: int = 16, e2e: float = 1.0) -> RequestResult:
    return RequestResult(ok=True, ttft=ttft, e2e=e2e, completion_tokens=tokens, prompt_tokens=300)


def test_run_metrics_split_first_and_repeated_turns() -> None:
    results = [(1, _result(0.4)), (2, _result(0.1)), (1, _result(0.6)), (2, _result(0.3))]
    metrics = run_metrics(results, wall=2.0)
    assert metrics["ttft_turn1_ms_p50"] == pytest.approx(500) and metrics["ttft_turn2_ms_p50"] == pytest.approx(200)
    assert metrics["output_throughput"] == pytest.approx(64 / 2.0) and metrics["errors"] == 0


def test_medians_skip_missing_rounds() -> None:
    rounds = [
        {"ttft_ms_p50": 10.0, "output_throughput": 5.0},
        {"ttft_ms_p50": 30.0, "output_throughput": None},
        {"ttft_ms_p50": 20.0, "output_throughput": 7.0},
    ]
    medians = median_metrics(rounds)
    assert medians["ttft_ms_p50"] == 20.0 and medians["output_throughput"] == 6.0 and medians["tpot_ms_p50"] is None


def _figures(tps1: float, ttft1: float, tps4: float, ttft4: float) -> dict[int, dict[str, Any]]:
    return {1: {"output_throughput": tps1, "ttft_ms_p50": ttft1}, 4: {"output_throughput": tps4, "ttft_ms_p50": ttft4}}


def test_the_best_is_better_on_average_over_throughput_and_first_token() -> None:
    medians = {
        "base": _figures(10, 100, 20, 200),
        "faster": _figures(11, 50, 22, 100),
        "throughput-only": _figures(10, 300, 30, 600),
        "broken": _figures(0, 100, 20, 200),
    }
    best, scores = pick_best(medians, "base")
    assert best == "faster" and scores["base"] == 0.0
    assert scores["faster"] == pytest.approx((2 * math.log(1.1) + 2 * math.log(2)) / 4)
    assert scores["broken"] == -math.inf
    assert pick_best({"base": _figures(1, 1, 1, 1), "same": _figures(1, 1, 1, 1)}, "base")[0] == "base"  # tie


def test_the_page_lists_every_configuration_best_first() -> None:
    medians = {"base": _figures(10, 100, 20, 200), "faster": _figures(11, 50, 22, 100)}
    for by_c in medians.values():
        for figures in by_c.values():
            figures.update(ttft_turn1_ms_p50=1.0, ttft_turn2_ms_p50=2.0, tpot_ms_p50=3.0)
    best, scores = pick_best(medians, "base")
    page = render_markdown(
        {
            "model": "m.gguf",
            "machine": "x86_64",
            "xllamacpp": "1",
            "rounds": 2,
            "foreign_share": 0.5,
            "system_prompt_tokens": 310,
            "baseline": "base",
            "workload": {"max_tokens": 16, "concurrency": [1, 4]},
            "medians": medians,
            "scores": scores,
            "best": best,
        }
    )
    rows = [line for line in page.splitlines() if line.startswith("| faster") or line.startswith("| base")]
    assert rows[0].startswith("| faster **best**") and "+0.000" in rows[1]
    assert "others' load during the run: 50%" in page and "~310-token system prompt" in page


def test_the_gpu_sweep_offloads_every_layer_with_more_slots(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    sweep = gpu_llama_defaults.build_sweep(gpu_llama_defaults.parse_args([str(model), "--rounds", "1"]))
    names = [c.name for c in sweep.configs]
    assert {"unified np=16", "per-slot np=16", "per-slot np=8 batch=4096/1024"} <= set(names)
    assert "np=1" not in names and sweep.baseline in names
    assert sweep.n_gpu_layers >= 999 and sweep.model == model and sweep.workload.concurrency == (1, 4, 16)
    for bad in (tmp_path / "missing.gguf", tmp_path / "model.bin"):
        if bad.suffix == ".bin":
            bad.write_bytes(b"x")
        with pytest.raises(SystemExit):
            gpu_llama_defaults.build_sweep(gpu_llama_defaults.parse_args([str(bad)]))


def test_prefilled_tokens_are_read_from_llama_cpps_log() -> None:
    from benchmark.llama_defaults import prefilled_tokens

    log = (
        "0.01 I slot print_timing: id  3 | task 0 | prompt eval time =   19179.96 ms /   382 tokens (   50.21 ms "
        "per token)\n0.02 I slot print_timing: id  3 | task 0 |        eval time =    2603.99 ms /    16 tokens\n"
        "0.03 I slot print_timing: id  1 | task 5 | prompt eval time =    3818.25 ms /    63 tokens (60 ms)\n"
    )
    assert prefilled_tokens(log) == [382, 63]
    assert prefilled_tokens("") == []
