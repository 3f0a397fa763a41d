"""Tests of the pure parts of the engine-vs-platform and control-plane benchmarks: no server is started."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from benchmark import _proc, _raw_server, compare_engine
from benchmark.bench_control_plane import last_logged_seconds, latency_ms, median_or_none
from benchmark.compare_engine import (
    RunRecord,
    Step,
    ab_schedule,
    chunks_per_delivery,
    compare_summaries,
    cpu_ms_per_token,
    format_comparison,
    hot_spots,
    pairs,
    pooled_summary,
    round_intervals,
    summarize_comparison,
)
from benchmark.run_all import (
    DEFAULT_NOTES,
    NOTES_END,
    NOTES_START,
    evaluate_targets,
    extract_notes,
    noise_warning,
    render_markdown,
)
from benchmark.stats import RequestResult


def request(ttft: float, tokens: int, e2e: float, prompt_tokens: int = 10) -> RequestResult:
    return RequestResult(ok=True, ttft=ttft, e2e=e2e, completion_tokens=tokens, prompt_tokens=prompt_tokens)


def record(side: str, concurrency: int, round_: int, ttft: float, e2e: float, wall: float, **cpu: float) -> RunRecord:
    results = [request(ttft, 11, e2e), request(ttft, 11, e2e)]
    return RunRecord(Step(round_, concurrency, side), results, wall, dict(cpu))


# -- the A/B schedule --------------------------------------------------------------------------------------------
def test_schedule_alternates_sides_within_each_level_and_round() -> None:
    steps = ab_schedule(2, [1, 8])
    assert [(s.round, s.concurrency, s.side) for s in steps] == [
        (0, 1, "raw"),
        (0, 1, "ours"),
        (0, 8, "raw"),
        (0, 8, "ours"),
        (1, 1, "ours"),  # the side that goes first alternates by round
        (1, 1, "raw"),
        (1, 8, "ours"),
        (1, 8, "raw"),
    ]


def test_schedule_keeps_the_side_order_given() -> None:
    assert [s.side for s in ab_schedule(1, [4], sides=("b", "a"))] == ["b", "a"]


@pytest.mark.parametrize(
    ("rounds", "levels", "sides"),
    [(0, [1], ("raw", "ours")), (1, [], ("raw", "ours")), (1, [0], ("raw", "ours")), (1, [1], ("raw", "raw"))],
)
def test_schedule_rejects_bad_input(rounds: int, levels: list[int], sides: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        ab_schedule(rounds, levels, sides)


def test_pairs_group_consecutive_steps_of_a_round_and_level() -> None:
    grouped = pairs(ab_schedule(2, [1, 8]))
    assert len(grouped) == 4
    assert [[s.side for s in pair] for pair in grouped] == [["raw", "ours"]] * 2 + [["ours", "raw"]] * 2
    assert [(pair[0].round, pair[0].concurrency) for pair in grouped] == [(0, 1), (0, 8), (1, 1), (1, 8)]


def test_patience_is_a_budget_of_extra_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(_proc, "wait_for_quiet", lambda at_most: waits.append(at_most) or at_most / 2)
    patience = _proc.Patience(10.0)
    assert patience.wait_for_quiet(30.0) == 5.0 and waits == [10.0]  # never waits past the budget
    patience.spend(4.0)
    assert not patience.exhausted and patience.left == pytest.approx(1.0)
    patience.spend(1.5)
    assert patience.exhausted and patience.wait_for_quiet(30.0) == 0.0 and len(waits) == 1


SIDE_TARGETS: dict[str, Any] = {"raw": None, "ours": None}


def _fake_measures(monkeypatch: pytest.MonkeyPatch, shares: list[tuple[float, float]]) -> list[int]:
    """Make ``measure`` return records whose foreign shares come from ``shares``, one pair per attempt."""
    flat = iter([share for pair in shares for share in pair])
    calls: list[int] = []

    def fake(target: Any, step: Step, config: Any, watch: Any = None) -> RunRecord:
        calls.append(step.round)
        return RunRecord(step, [request(0.05, 11, 1.05)], 1.0, {}, next(flat))

    monkeypatch.setattr(compare_engine, "measure", fake)
    monkeypatch.setattr(_proc, "wait_for_quiet", lambda at_most: 0.0)
    return calls


def test_a_disturbed_pair_is_measured_again_and_the_least_disturbed_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_measures(monkeypatch, [(0.3, 0.2), (0.5, 0.05), (0.15, 0.2)])
    config = compare_engine.CompareConfig(noise_limit=0.1, max_attempts=3)
    kept = compare_engine._measure_pair(
        ab_schedule(1, [1]), SIDE_TARGETS, config, None, _proc.Patience(60), lambda _: None
    )
    assert len(calls) == 6
    assert [r.foreign_share for r in kept] == [0.15, 0.2] and all(r.attempts == 3 for r in kept)


def test_a_quiet_pair_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_measures(monkeypatch, [(0.02, 0.01)])
    config = compare_engine.CompareConfig(noise_limit=0.1)
    kept = compare_engine._measure_pair(
        ab_schedule(1, [8]), SIDE_TARGETS, config, None, _proc.Patience(60), lambda _: None
    )
    assert len(calls) == 2 and [r.attempts for r in kept] == [1, 1]


def test_no_patience_left_means_no_second_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_measures(monkeypatch, [(0.5, 0.5)])
    config = compare_engine.CompareConfig(noise_limit=0.1)
    kept = compare_engine._measure_pair(
        ab_schedule(1, [8]), SIDE_TARGETS, config, None, _proc.Patience(0), lambda _: None
    )
    assert len(calls) == 2 and kept[0].foreign_share == 0.5


# -- ratios and summaries ------------------------------------------------------------------------------------------
def summary(throughput: float | None, ttft50: float | None, ttft99: float, tpot50: float, e2e50: float) -> dict:
    return {
        "output_throughput": throughput,
        "ttft_ms_p50": ttft50,
        "ttft_ms_p99": ttft99,
        "tpot_ms_p50": tpot50,
        "tpot_ms_mean": tpot50,
        "e2e_ms_p50": e2e50,
    }


def test_compare_summaries_gives_ratios_and_added_milliseconds() -> None:
    raw = summary(100.0, 50.0, 80.0, 10.0, 700.0)
    ours = summary(98.0, 52.5, 90.0, 10.2, 714.0)
    got = compare_summaries(raw, ours)
    assert got["output_throughput_ratio"] == pytest.approx(0.98)
    assert got["ttft_p50_added_ms"] == pytest.approx(2.5)
    assert got["ttft_p99_added_ms"] == pytest.approx(10.0)
    assert got["tpot_p50_ratio"] == pytest.approx(1.02)
    assert got["e2e_p50_ratio"] == pytest.approx(1.02)


def test_compare_summaries_is_none_where_a_side_has_no_figure() -> None:
    raw = summary(0.0, None, 80.0, 10.0, 700.0)
    ours = summary(None, 52.5, 90.0, 10.2, 714.0)
    got = compare_summaries(raw, ours)
    assert got["output_throughput_ratio"] is None
    assert got["ttft_p50_added_ms"] is None


def test_pooled_summary_sums_walls_and_tokens_over_runs() -> None:
    runs = [record("raw", 1, 0, 0.05, 1.05, wall=2.0), record("raw", 1, 1, 0.05, 1.05, wall=2.4)]
    pooled = pooled_summary(runs)
    assert pooled["completed"] == 4
    assert pooled["wall_seconds"] == pytest.approx(4.4)
    assert pooled["output_throughput"] == pytest.approx(44 / 4.4)
    assert pooled["tpot_ms_p50"] == pytest.approx(100.0)


def test_cpu_per_token_is_per_group_over_all_tokens() -> None:
    runs = [
        record("ours", 8, 0, 0.1, 1.1, 1.0, api=0.011, model=0.22),
        record("ours", 8, 1, 0.1, 1.1, 1.0, api=0.011, model=0.22),
    ]
    per_token = cpu_ms_per_token(runs)
    assert per_token["api"] == pytest.approx(0.022 * 1000 / 44)
    assert per_token["model"] == pytest.approx(0.44 * 1000 / 44)


def test_summarize_comparison_pools_rounds_and_keeps_per_round_ratios() -> None:
    records = [
        record("raw", 1, 0, 0.050, 1.05, 2.0, engine=2.0),
        record("ours", 1, 0, 0.052, 1.06, 2.0 / 0.99, api=0.02, model=2.0, model_loop=0.01),
        record("raw", 1, 1, 0.050, 1.05, 2.0, engine=2.0),
        record("ours", 1, 1, 0.052, 1.06, 2.0 / 0.97, api=0.02, model=2.1, model_loop=0.01),
    ]
    records[1].foreign_share = 0.07
    (level,) = summarize_comparison(records, [1, 8])  # no runs at c=8: left out
    assert level["concurrency"] == 1
    assert [r["output_throughput_ratio"] for r in level["rounds"]] == [pytest.approx(0.99), pytest.approx(0.97)]
    assert level["compare"]["output_throughput_ratio"] == pytest.approx(4.0 / (2.0 / 0.99 + 2.0 / 0.97))
    assert level["compare"]["ttft_p50_added_ms"] == pytest.approx(2.0)
    assert level["max_foreign_share"] == pytest.approx(0.07)
    extra = level["platform_cpu_ms_per_token"]
    assert extra["api"] == pytest.approx(40 / 44)
    assert extra["model_loop"] == pytest.approx(20 / 44)
    assert extra["total"] == pytest.approx(60 / 44)
    assert extra["model_minus_raw"] == pytest.approx(100 / 44)
    assert level["chunks_per_delivery"] == {"raw": 1.0, "ours": 1.0}
    table = format_comparison([level])
    assert "0.980" in table and "+2.00" in table


def test_the_idle_share_of_the_platform_cpu_is_its_idle_rate_over_the_runs_wall() -> None:
    records = [
        record("raw", 1, 0, 0.050, 1.05, 2.0, engine=2.0),
        record("ours", 1, 0, 0.052, 1.06, 2.0, api=0.02, model=2.0, model_loop=0.01),
        record("ours", 1, 1, 0.052, 1.06, 3.0, api=0.02, model=2.0, model_loop=0.01),
        record("raw", 1, 1, 0.050, 1.05, 2.0, engine=2.0),
    ]
    (level,) = summarize_comparison(records, [1])
    assert "idle_background" not in level["platform_cpu_ms_per_token"]  # idle not measured: no claim made
    rates = {"raw": {"engine": 0.001}, "ours": {"api": 0.004, "model": 0.01, "model_loop": 0.002}}
    for one in records:
        one.idle_cpu_seconds = {group: rate * one.wall_seconds for group, rate in rates[one.step.side].items()}
    (level,) = summarize_comparison(records, [1])
    # 5 s of wall over both runs of ours, 44 tokens: (0.004 + 0.002) x 5 s = 30 ms
    assert level["platform_cpu_ms_per_token"]["idle_background"] == pytest.approx(30 / 44)
    assert level["idle_cpu_ms_per_token"]["api"] == pytest.approx(20 / 44)
    assert level["platform_cpu_ms_per_token"]["total"] == pytest.approx(60 / 44)  # the total still holds it all


def test_measure_idle_reads_each_sides_cpu_rate_with_no_request() -> None:
    started = compare_engine.time.perf_counter()

    def burning(share: float) -> Any:  # a process group that burns ``share`` of a core
        return lambda: share * (compare_engine.time.perf_counter() - started)

    targets = {
        "raw": compare_engine.Target("raw", "", "", {}, {"engine": burning(0.25)}),
        "ours": compare_engine.Target("ours", "", "", {}, {"api": burning(0.5), "model_loop": burning(0.0)}),
    }
    rates = compare_engine.measure_idle(targets, 0.2)
    assert rates["raw"]["engine"] == pytest.approx(0.25, rel=0.05)
    assert rates["ours"] == {"api": pytest.approx(0.5, rel=0.05), "model_loop": 0.0}
    assert compare_engine.measure_idle(targets, 0) == {}


def test_chunks_per_delivery_counts_chunks_that_arrive_together() -> None:
    apart = RequestResult(ok=True, ttft=0.05, itl=[0.007, 0.007, 0.007])  # 4 chunks, 4 deliveries
    batched = RequestResult(ok=True, ttft=0.05, itl=[0.0001, 0.02, 0.0001, 0.0001])  # 5 chunks, 2 deliveries
    failed = RequestResult(ok=False, itl=[0.0001] * 9)
    assert chunks_per_delivery([apart]) == 1.0
    assert chunks_per_delivery([batched]) == 2.5
    assert chunks_per_delivery([apart, batched, failed]) == pytest.approx(9 / 6)
    assert chunks_per_delivery([failed]) is None


# -- py-spy output -----------------------------------------------------------------------------------------------
def test_hot_spots_ranks_self_and_inclusive_time_per_token() -> None:
    collapsed = "\n".join(
        [
            "main (/x/app.py:1);loop (/x/asyncio/base_events.py:10);encode (/x/api/sse.py:5) 30",
            "main (/x/app.py:1);loop (/x/asyncio/base_events.py:12);read (/x/api/sse.py:9) 10",
            "main (/x/app.py:2);loop (/x/asyncio/base_events.py:10) 60",
            "garbage line",
        ]
    )
    spots = hot_spots(collapsed, rate_hz=100, tokens=10)
    assert spots["busy_samples"] == 100
    assert spots["busy_us_per_token"] == pytest.approx(100 / 100 * 1e6 / 10)
    assert spots["self"][0] == {"function": "loop (asyncio/base_events.py)", "share": 0.6, "us_per_token": 60_000}
    assert spots["self"][1]["function"] == "encode (api/sse.py)"
    assert spots["inclusive"][0]["share"] == 1.0  # main and loop are on every stack, counted once per stack


def test_hot_spots_of_an_empty_profile() -> None:
    assert hot_spots("", 100, 0) == {"busy_samples": 0, "busy_us_per_token": None, "self": [], "inclusive": []}


# -- helpers ---------------------------------------------------------------------------------------------------------
def test_foreign_share_subtracts_our_cpu_and_clamps_at_zero() -> None:
    assert _proc.foreign_share(3.0, 1.0, wall_seconds=2.0, cores=2) == pytest.approx(0.5)
    assert _proc.foreign_share(1.0, 1.2, wall_seconds=2.0, cores=2) == 0.0
    with pytest.raises(ValueError):
        _proc.foreign_share(1.0, 0.0, wall_seconds=0.0, cores=2)


def test_engine_settings_round_trip_to_raw_server_arguments() -> None:
    settings = _proc.EngineSettings(n_ctx=4096, n_parallel=3, n_threads=2, n_threads_batch=1, kv_unified=False)
    args = _raw_server.parse_args(["--model", "m.gguf", *settings.to_args()])
    assert (args.n_ctx, args.n_parallel, args.threads, args.threads_batch) == (4096, 3, 2, 1)
    assert args.kv_unified is False and args.cache_prompt is True and args.flash_attn == "auto"


def test_raw_server_params_mirror_the_engine_and_carry_no_api_key() -> None:
    class Params(SimpleNamespace):
        pass

    fake = SimpleNamespace(
        CommonParams=lambda: Params(model=Params(), cpuparams=Params(), cpuparams_batch=Params(), api_keys=[])
    )
    args = _raw_server.parse_args(["--model", "m.gguf", "--n-ctx", "8192", "--n-parallel", "4", "--threads", "2"])
    params: Any = _raw_server.build_params(fake, args)
    assert params.model.path == "m.gguf"
    assert (params.n_ctx, params.n_parallel, params.kv_unified) == (8192, 4, True)
    assert (params.cpuparams.n_threads, params.cpuparams_batch.n_threads) == (2, 2)
    assert params.flash_attn_type == -1 and params.n_gpu_layers == 0 and params.cache_prompt is True
    assert params.hostnames == ["127.0.0.1"] and params.port == 0 and params.api_keys == []


def test_parity_mismatches_lists_only_differing_settings() -> None:
    settings = _proc.EngineSettings(n_ctx=8192, n_parallel=4, n_threads=2, n_threads_batch=2)
    resolved = {**settings.as_dict(), "n_batch": None}
    assert _proc.parity_mismatches(settings, resolved) == {}
    assert _proc.parity_mismatches(settings, {**resolved, "n_parallel": 8}) == {"n_parallel": [4, 8]}
    assert _proc.EngineSettings.from_engine_config(resolved) == settings


def test_latency_statistics_in_milliseconds() -> None:
    stats = latency_ms([0.001, 0.002, 0.003])
    assert stats["p50"] == pytest.approx(2.0)
    assert stats["mean"] == pytest.approx(2.0)
    assert stats["p99"] == pytest.approx(2.98)
    assert latency_ms([])["p50"] is None
    assert median_or_none([]) is None and median_or_none([3.0, 1.0, 2.0]) == 2.0


def test_last_logged_seconds_takes_the_last_match() -> None:
    log = "x loaded with llama.cpp in 3.50s\ny loaded with llama.cpp in 0.45s\n"
    assert last_logged_seconds(re.compile(r"loaded with \S+ in ([0-9.]+)s"), log) == 0.45
    assert last_logged_seconds(re.compile(r"ready in ([0-9.]+)s"), log) is None


# -- targets and the markdown report ----------------------------------------------------------------------------
def report(ratio: float = 0.99, added: float = 1.0, ready: float = 0.4, launch: float = 1.4) -> dict[str, Any]:
    raw = {"output_throughput": 100.0, "ttft_ms_p50": 50.0, "tpot_ms_p50": 10.0}
    ours = {"output_throughput": 100.0 * ratio, "ttft_ms_p50": 50.0 + added, "tpot_ms_p50": 10.1}
    level = {
        "concurrency": 8,
        "raw": raw,
        "ours": ours,
        "compare": {"output_throughput_ratio": ratio, "ttft_p50_added_ms": added, "tpot_p50_ratio": 1.01},
        "rounds": [{"output_throughput_ratio": ratio}],
        "cpu_ms_per_token": {"raw": {"engine": 10.0}, "ours": {"api": 0.1, "model": 10.05}},
        "platform_cpu_ms_per_token": {"api": 0.1, "model_loop": 0.1, "total": 0.2, "model_minus_raw": 0.05},
        "chunks_per_delivery": {"raw": 1.0, "ours": 1.0},
        "max_foreign_share": 0.02,
    }
    memory = {"rss_mb": 90.0, "uss_mb": 70.0, "processes": []}
    return {
        "machine": {
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
            "commit": "abc1234",
            "load_average_start": [0.1, 0.2, 0.3],
        },
        "compare": {
            "config": {"endpoint": "chat", "max_tokens": 64, "num_prompts": 16, "rounds": 2},
            "engine_settings": {
                "n_ctx": 8192,
                "n_parallel": 4,
                "n_threads": 2,
                "n_threads_batch": 2,
                "kv_unified": True,
                "flash_attn": "auto",
            },
            "levels": [level],
            "problems": [],
            "parity_mismatches": {},
            "prompt_tokens_equal": True,
            "profile": None,
        },
        "control_plane": {
            "ready_seconds": [ready, ready],
            "ready_seconds_median": ready,
            "ready_logged_seconds": [1.0, 1.0],
            "launch_first_seconds": 3.0,
            "launch_seconds": [launch],
            "launch_seconds_median": launch,
            "model_logged_load_seconds": [0.5],
            "engine_load_seconds": [0.45],
            "engine_load_seconds_median": 0.45,
            "engine_process_ready_seconds": [0.5],
            "engine_process_ready_seconds_median": 0.5,
            "idle": memory,
            "platform_after_launch": memory,
            "model_process": memory,
            "raw_engine_process": memory,
            "list_models_ms": {"p50": 0.5, "p99": 0.8, "mean": 0.5, "n": 200},
        },
    }


def test_targets_met_and_missed() -> None:
    verdicts = {v.name: v for v in evaluate_targets(report())}
    assert all(v.met for v in verdicts.values())
    missed = {v.name for v in evaluate_targets(report(ratio=0.95, added=4.0, ready=0.6)) if v.met is False}
    assert missed == {"output tok/s ours/raw, c=8", "TTFT p50 added, c=8", "xinference-local ready (median)"}
    launch = {v.name: v for v in evaluate_targets(report(launch=1.46))}["model launch (median)"]
    assert launch.met is False and "1.45 s" in launch.target


def test_a_missing_figure_is_not_judged() -> None:
    data = report()
    data["control_plane"]["ready_seconds_median"] = None
    ready = {v.name: v for v in evaluate_targets(data)}["xinference-local ready (median)"]
    assert ready.met is None and ready.status == "n/a"


def test_markdown_lists_figures_targets_and_gaps() -> None:
    text = render_markdown(report(ratio=0.95))
    assert "Test CPU" in text and "xllamacpp 1" in text and "xoscar 0.12.2" in text
    assert "| output tok/s ours/raw, c=8 | 0.950 x | >= 0.98 | **MISSED** |" in text
    assert "| xinference-local ready (median) | 0.40 s | <= 0.5 s | **met** |" in text
    gaps = text.split("## Gaps", 1)[1]
    assert "output tok/s ours/raw, c=8: 0.950 x" in gaps
    assert DEFAULT_NOTES in gaps


def test_markdown_without_gaps_says_so() -> None:
    assert "none: every measured target is met" in render_markdown(report())


def test_notes_survive_a_rewrite() -> None:
    notes = "- the API process spends 40% in json encoding\n- fix: ..."
    first = render_markdown(report(), notes)
    assert extract_notes(first) == notes
    assert extract_notes(render_markdown(report(), extract_notes(first))) == notes
    assert extract_notes("no markers here") is None
    assert extract_notes(f"{NOTES_END} {NOTES_START}") is None


def test_noise_warning_only_above_the_limit() -> None:
    quiet = report()
    assert noise_warning(quiet, 0.1) is None
    quiet["compare"]["levels"][0]["max_foreign_share"] = 0.4
    warning = noise_warning(quiet, 0.1)
    assert warning is not None and "40%" in warning


def test_markdown_renders_with_only_one_part() -> None:
    data = report()
    del data["control_plane"]
    text = render_markdown(data)
    assert "## Raw engine vs the platform" in text and "## Control plane" not in text


def test_stream_smoothness_is_judged_on_delivery_gaps_at_one_and_four_streams() -> None:
    data = report()
    level = data["compare"]["levels"][0]
    level["raw"]["gap_ms_p50"], level["ours"]["gap_ms_p50"] = 6.0, 40.0
    assert not any("delivery gap" in v.name for v in evaluate_targets(data))  # c=8: not a smoothness level
    level["concurrency"] = 4
    gap = {v.name: v for v in evaluate_targets(data)}["stream delivery gap p50 ours/raw, c=4"]
    assert gap.met is False and gap.value == pytest.approx(40 / 6)
    level["ours"]["gap_ms_p50"] = 8.0
    assert {v.name: v for v in evaluate_targets(data)}["stream delivery gap p50 ours/raw, c=4"].met is True


def _seven_rounds(ratios: list[float]) -> dict[str, object]:
    """A level's ``intervals`` from per-round throughput ratios, as summarize_comparison stores them."""
    return round_intervals([{"output_throughput_ratio": r} for r in ratios])


def test_a_figure_over_rounds_is_judged_on_its_interval() -> None:
    data = report()
    level = data["compare"]["levels"][0]
    name = "output tok/s ours/raw, c=8"
    level["intervals"] = _seven_rounds([1.00, 0.995, 1.005, 0.998, 1.002, 0.999, 1.001])
    verdict = {v.name: v for v in evaluate_targets(data)}[name]
    assert verdict.status == "met" and verdict.rounds == 7 and verdict.interval is not None
    assert verdict.interval[0] > 0.98
    level["intervals"] = _seven_rounds([0.90, 1.06, 0.95, 1.03, 0.99, 0.93, 1.02])  # straddles 0.98
    verdict = {v.name: v for v in evaluate_targets(data)}[name]
    assert verdict.status == "inconclusive" and verdict.met is None
    assert "7 rounds" in verdict.measured and "[" in verdict.measured
    level["intervals"] = _seven_rounds([0.95, 0.951, 0.949, 0.95, 0.952, 0.948, 0.95])
    assert {v.name: v for v in evaluate_targets(data)}[name].status == "MISSED"
    assert f"| {name} | 0.950 x [0.949, 0.951], 7 rounds | >= 0.98 | **MISSED** |" in render_markdown(data)


def test_summarize_comparison_gives_each_figure_an_interval_over_rounds() -> None:
    records = []
    for number, ratio in enumerate([0.99, 0.97, 0.98]):
        records += [
            record("raw", 1, number, 0.050, 1.05, 2.0, engine=2.0),
            record("ours", 1, number, 0.052, 1.06, 2.0 / ratio, api=0.02, model=2.0, model_loop=0.01),
        ]
    (level,) = summarize_comparison(records, [1])
    throughput = level["intervals"]["output_throughput_ratio"]
    assert throughput["rounds"] == 3 and throughput["low"] < 0.97 and throughput["high"] > 0.99
    assert throughput["value"] == pytest.approx((0.99 * 0.97 * 0.98) ** (1 / 3))
    assert level["intervals"]["ttft_p50_added_ms"]["value"] == pytest.approx(2.0)
    assert level["intervals"]["platform_cpu_ms_per_token"]["value"] == pytest.approx(30 / 22)
    assert "[" in format_comparison([level])
