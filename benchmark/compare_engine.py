"""What the platform costs on top of its engine: the same GGUF served raw and through Xinference, in one run.

Side ``raw`` is llama.cpp's own OpenAI server (``xllamacpp.Server`` in :mod:`benchmark._raw_server`); side
``ours`` is ``xinference-local`` with the model launched through ``POST /v1/models``. Both get the same engine
settings (the raw side copies what the platform resolved, and any difference is reported), the same prompts and
greedy sampling with ``ignore_eos`` so every request generates exactly ``--max-tokens`` tokens. Measured runs
alternate raw/ours at each concurrency level for ``--rounds`` rounds, so machine noise lands on both sides; only
one side is loaded at a time, the other sits idle. Each side is warmed up first, unmeasured::

    python -m benchmark.compare_engine --rounds 7 --concurrency 1,8 --json-out compare.json

Printed and saved: output tokens/s ours/raw, TTFT p50 added (ms) and TPOT ratio at each concurrency, pooled over
the rounds, plus the per-round figures with their estimate and 95% interval (``benchmark/intervals.py``; each round
uses fresh prompts and swaps which side goes first) and the server-side CPU each side spent per generated token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/compare_engine.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmark import _proc
from benchmark.bench_serving import build_prompts, parse_concurrency, run_benchmark
from benchmark.intervals import MIN_ROUNDS, Estimate, difference_estimate, format_estimate, ratio_estimate
from benchmark.profile_stacks import hot_spots
from benchmark.stats import DELIVERY_GAP_SECONDS, RequestResult, summarize

SIDES: tuple[str, str] = ("raw", "ours")
MODEL_UID = "bench-compare"
WARMUP_SEED = 10_000
PROFILE_RATE = 200  # py-spy samples per second


@dataclass(frozen=True)
class CompareConfig:
    rounds: int = MIN_ROUNDS
    concurrency: tuple[int, ...] = (1, 8)
    num_prompts: int = 16
    max_tokens: int = 128
    n_parallel: int = 4
    n_ctx: int = 8192
    n_threads: int | None = None  # None: what the platform picks (all usable cores); the raw side copies it
    endpoint: str = "chat"
    seed: int = 0
    warmup_prompts: int = 8
    profile: bool = False  # one extra, unmeasured run of ``ours`` under py-spy
    noise_limit: float = 0.10  # a pair of runs is redone when other processes took more of the machine than this
    max_attempts: int = 3
    quiet_wait: float = 60.0  # seconds to wait for the machine to go quiet before each pair
    patience: float = 240.0  # extra seconds, in all, that waiting for quiet and measuring again may take
    idle_seconds: float = 10.0  # after the warm-up, how long both sides' CPU is read with no request (0: not)

    def launch_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"n_ctx": self.n_ctx, "n_parallel": self.n_parallel}
        if self.n_threads is not None:
            options["n_threads"] = options["n_threads_batch"] = self.n_threads
        return options


# -- pure parts --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One measured run: ``side`` at ``concurrency`` in round ``round``."""

    round: int
    concurrency: int
    side: str


def ab_schedule(rounds: int, levels: Sequence[int], sides: Sequence[str] = SIDES) -> list[Step]:
    """Measured runs in order: each round visits every level, and at each level every side in turn; the side that
    goes first alternates from round to round (A B, B A, A B, ...).

    Alternating at the finest grain puts the two sides of a comparison seconds apart, so slow drifts of the
    machine (other load, thermal state) hit both alike; swapping the order each round keeps "ran second" (a warm
    cache, a machine just left by the other side) from favouring one side in every round.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not levels or min(levels) < 1:
        raise ValueError(f"concurrency levels must be >= 1, got {list(levels)}")
    if len(set(sides)) != len(sides) or not sides:
        raise ValueError(f"sides must be distinct and non-empty, got {list(sides)}")
    return [Step(r, c, side) for r in range(rounds) for c in levels for side in (sides if r % 2 == 0 else sides[::-1])]


def pairs(steps: Sequence[Step]) -> list[list[Step]]:
    """Consecutive steps of the same round and level: the unit that is measured (and redone) together."""
    grouped: list[list[Step]] = []
    for step in steps:
        if grouped and (grouped[-1][0].round, grouped[-1][0].concurrency) == (step.round, step.concurrency):
            grouped[-1].append(step)
        else:
            grouped.append([step])
    return grouped


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def compare_summaries(raw: dict[str, Any], ours: dict[str, Any]) -> dict[str, float | None]:
    """Ours relative to raw: throughput and TPOT as ratios, TTFT as milliseconds added."""
    return {
        "output_throughput_ratio": _ratio(ours["output_throughput"], raw["output_throughput"]),
        "ttft_p50_added_ms": _difference(ours["ttft_ms_p50"], raw["ttft_ms_p50"]),
        "ttft_p99_added_ms": _difference(ours["ttft_ms_p99"], raw["ttft_ms_p99"]),
        "tpot_p50_ratio": _ratio(ours["tpot_ms_p50"], raw["tpot_ms_p50"]),
        "tpot_mean_ratio": _ratio(ours["tpot_ms_mean"], raw["tpot_ms_mean"]),
        "e2e_p50_ratio": _ratio(ours["e2e_ms_p50"], raw["e2e_ms_p50"]),
        "gap_p50_ratio": _ratio(ours.get("gap_ms_p50"), raw.get("gap_ms_p50")),
    }


#: Per-round figures that get a confidence interval, and whether each is a ratio or a difference
INTERVAL_FIGURES: dict[str, str] = {
    "output_throughput_ratio": "ratio",
    "ttft_p50_added_ms": "difference",
    "tpot_p50_ratio": "ratio",
    "gap_p50_ratio": "ratio",
    "platform_cpu_ms_per_token": "difference",
}


def round_intervals(per_round: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Each of :data:`INTERVAL_FIGURES` over the rounds: estimate and 95% interval (``benchmark/intervals.py``)."""
    out: dict[str, dict[str, Any] | None] = {}
    for key, kind in INTERVAL_FIGURES.items():
        values = [r.get(key) for r in per_round]
        estimate = ratio_estimate(values) if kind == "ratio" else difference_estimate(values)
        out[key] = None if estimate is None else estimate.to_dict()
    return out


@dataclass
class RunRecord:
    """One measured run: its step, the requests' results, the wall time and server CPU seconds by process group."""

    step: Step
    results: list[RequestResult]
    wall_seconds: float
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    foreign_share: float = 0.0  # share of the machine other processes used during the run
    attempts: int = 1
    top_foreign: list[tuple[str, float]] = field(default_factory=list)  # who else used the CPU (cmd, seconds)
    #: what each process group burns with no request at all (timers, heartbeats, watchers) over this run's wall
    idle_cpu_seconds: dict[str, float] = field(default_factory=dict)


def pooled_summary(records: Sequence[RunRecord]) -> dict[str, Any]:
    """One summary over several runs of the same side and level: all requests, throughput over summed walls."""
    results = [r for record in records for r in record.results]
    return summarize(results, sum(record.wall_seconds for record in records))


def cpu_ms_per_token(records: Sequence[RunRecord], idle: bool = False) -> dict[str, float | None]:
    """Server CPU milliseconds per generated token for each process group, summed over ``records``; with ``idle``,
    the share of it that the group burns without any request (its rate at idle times the runs' wall time)."""
    tokens = sum(r.completion_tokens for record in records for r in record.results if r.ok)
    spent_by = (lambda record: record.idle_cpu_seconds) if idle else (lambda record: record.cpu_seconds)
    groups = sorted({group for record in records for group in spent_by(record)})
    per_token: dict[str, float | None] = {}
    for group in groups:
        spent = sum(spent_by(record).get(group, 0.0) for record in records)
        per_token[group] = spent * 1000 / tokens if tokens else None
    return per_token


def chunks_per_delivery(results: Sequence[RequestResult], gap_seconds: float = DELIVERY_GAP_SECONDS) -> float | None:
    """Average streamed chunks that reached the client together (closer than ``gap_seconds``).

    About 1 when every token travels on its own (one SSE write, and on the platform one actor pull, per token);
    higher when the server batches chunks.
    """
    chunks = deliveries = 0
    for result in results:
        if not result.ok or result.ttft is None:
            continue
        chunks += len(result.itl) + 1
        deliveries += 1 + sum(1 for gap in result.itl if gap > gap_seconds)
    return chunks / deliveries if deliveries else None


def summarize_comparison(records: Sequence[RunRecord], levels: Sequence[int]) -> list[dict[str, Any]]:
    """Per level: pooled summaries of both sides, ours-vs-raw figures, per-round ratios and CPU per token."""
    levels_out: list[dict[str, Any]] = []
    for level in levels:
        by_side = {side: [r for r in records if r.step.concurrency == level and r.step.side == side] for side in SIDES}
        if not all(by_side.values()):
            continue
        pooled = {side: pooled_summary(by_side[side]) for side in SIDES}
        rounds = sorted({r.step.round for r in by_side["raw"]} & {r.step.round for r in by_side["ours"]})
        per_round = []
        for number in rounds:
            runs = {side: [r for r in by_side[side] if r.step.round == number] for side in SIDES}
            pair = {side: pooled_summary(runs[side]) for side in SIDES}
            round_cpu = _platform_cpu({side: cpu_ms_per_token(runs[side]) for side in SIDES})
            per_round.append(
                {
                    "round": number,
                    **compare_summaries(pair["raw"], pair["ours"]),
                    "platform_cpu_ms_per_token": round_cpu["total"],
                }
            )
        cpu = {side: cpu_ms_per_token(by_side[side]) for side in SIDES}
        platform_cpu = _platform_cpu(cpu)
        idle = cpu_ms_per_token(by_side["ours"], idle=True)
        if idle:
            platform_cpu["idle_background"] = _sum(idle.get("api"), idle.get("model_loop"))
        levels_out.append(
            {
                "concurrency": level,
                "raw": pooled["raw"],
                "ours": pooled["ours"],
                "compare": compare_summaries(pooled["raw"], pooled["ours"]),
                "rounds": per_round,
                "intervals": round_intervals(per_round),
                "cpu_ms_per_token": cpu,
                "platform_cpu_ms_per_token": platform_cpu,
                "idle_cpu_ms_per_token": idle,
                "chunks_per_delivery": {
                    side: chunks_per_delivery([r for record in by_side[side] for r in record.results]) for side in SIDES
                },
                "max_foreign_share": max(r.foreign_share for side in SIDES for r in by_side[side]),
            }
        )
    return levels_out


def _platform_cpu(cpu: dict[str, dict[str, float | None]]) -> dict[str, float | None]:
    """CPU per token spent by the platform itself: the API process, plus the model actor's event loop.

    ``total`` is a lower bound: the engine callback threads of the model process are left out (small), and so is
    what the engine's own threads burn in addition because each token takes longer, which is what
    ``model_minus_raw`` shows (the model process beyond the raw engine process, engine threads included).
    ``total`` also holds what the same processes burn with no request at all; :func:`summarize_comparison` adds
    that share as ``idle_background`` when the idle rates were measured (``CompareConfig.idle_seconds``).
    """
    api = cpu["ours"].get("api")
    loop = cpu["ours"].get("model_loop")
    return {
        "api": api,
        "model_loop": loop,
        "total": _sum(api, loop),
        "model_minus_raw": _difference(cpu["ours"].get("model"), cpu["raw"].get("engine")),
    }


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def format_comparison(levels: Sequence[dict[str, Any]]) -> str:
    """Fixed-width table of the headline figures, one row per concurrency level."""
    header = (
        f"{'c':>3} {'raw tok/s':>10} {'ours tok/s':>11} {'ratio':>7} {'TTFT50 raw':>11} {'+ms':>8} "
        f"{'TPOT50 raw':>11} {'ratio':>7} {'ITL50 raw/ours':>15} {'ITL99 raw/ours':>15} "
        f"{'ratio over rounds, 95% CI':>30}"
    )
    lines = [header, "-" * len(header)]
    for level in levels:
        raw, ours, cmp = level["raw"], level["ours"], level["compare"]
        interval = (level.get("intervals") or {}).get("output_throughput_ratio")
        spread = format_estimate(None if interval is None else Estimate.from_dict(interval))
        lines.append(
            f"{level['concurrency']:>3} {_fmt(raw['output_throughput'], 1):>10}"
            f" {_fmt(ours['output_throughput'], 1):>11}"
            f" {_fmt(cmp['output_throughput_ratio'], 3):>7} {_fmt(raw['ttft_ms_p50'], 1):>11}"
            f" {_fmt(cmp['ttft_p50_added_ms'], 2, sign=True):>8} {_fmt(raw['tpot_ms_p50'], 2):>11}"
            f" {_fmt(cmp['tpot_p50_ratio'], 3):>7} {_pair(raw, ours, 'itl_ms_p50'):>15}"
            f" {_pair(raw, ours, 'itl_ms_p99'):>15} {spread:>30}"
        )
    return "\n".join(lines)


def _pair(raw: dict[str, Any], ours: dict[str, Any], key: str) -> str:
    """``raw/ours`` of one millisecond figure, e.g. ITL p50 side by side."""
    return f"{_fmt(raw.get(key), 1)}/{_fmt(ours.get(key), 1)}"


def _fmt(value: float | None, digits: int, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


# -- measuring -----------------------------------------------------------------------------------------------------
@dataclass
class Target:
    """One side: where to send requests, its processes by role, and readers of the CPU seconds to account."""

    side: str
    api: str
    model: str
    processes: dict[str, list[psutil.Process]]
    cpu: dict[str, Callable[[], float]] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)  # fields this server needs in every request


def _cpu_by_group(target: Target) -> dict[str, float]:
    return {group: read() for group, read in target.cpu.items()}


def measure(target: Target, step: Step, config: CompareConfig, watch: _proc.LoadWatch | None = None) -> RunRecord:
    """One measured run of ``target`` at ``step.concurrency``; round ``r`` uses prompt seed ``seed + r``."""
    prompts = build_prompts(config.num_prompts, config.seed + step.round)
    if watch is not None:
        watch.start()
    before = _cpu_by_group(target)
    results, wall = asyncio.run(
        run_benchmark(
            target.api,
            target.model,
            config.endpoint,
            prompts,
            step.concurrency,
            config.max_tokens,
            ignore_eos=True,
            extra_body=target.extra_body,
        )
    )
    after = _cpu_by_group(target)
    spent = {group: after[group] - before[group] for group in before}
    if watch is None:
        return RunRecord(step, results, wall, spent)
    return RunRecord(step, results, wall, spent, watch.stop(), top_foreign=watch.top_foreign)


def warm_up(target: Target, config: CompareConfig) -> None:
    """Unmeasured requests (other prompts than the measured ones) at the highest level; failures abort the run."""
    prompts = build_prompts(config.warmup_prompts, WARMUP_SEED)
    results, _ = asyncio.run(
        run_benchmark(
            target.api,
            target.model,
            config.endpoint,
            prompts,
            max(config.concurrency),
            config.max_tokens,
            ignore_eos=True,
            extra_body=target.extra_body,
        )
    )
    failed = [r for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{target.side}: {len(failed)}/{len(results)} warm-up requests failed: {failed[0].error}")


def run_line(record: RunRecord) -> dict[str, Any]:
    """The headline figures of one measured run, for the record of what each run saw."""
    summary = summarize(record.results, record.wall_seconds)
    return {
        **asdict(record.step),
        "output_throughput": summary["output_throughput"],
        "ttft_ms_p50": summary["ttft_ms_p50"],
        "tpot_ms_p50": summary["tpot_ms_p50"],
        "errors": summary["errors"],
        "foreign_share": record.foreign_share,
        "attempts": record.attempts,
        "top_foreign": record.top_foreign,
    }


def _measure_pair(
    pair: Sequence[Step],
    targets: dict[str, Target],
    config: CompareConfig,
    watch: _proc.LoadWatch,
    patience: _proc.Patience,
    log: Any,
    idle_rates: dict[str, dict[str, float]] | None = None,
) -> list[RunRecord]:
    """Measure the steps of one pair back to back; while others disturb it, measure it again.

    Up to ``max_attempts`` and as long as ``patience`` lasts (re-measurements spend it); the least disturbed
    attempt is kept. ``idle_rates`` (:func:`measure_idle`) give each run its idle CPU over its wall time.
    """
    best: list[RunRecord] = []
    for attempt in range(1, config.max_attempts + 1):
        patience.wait_for_quiet(config.quiet_wait)
        started = time.perf_counter()
        got = [measure(targets[step.side], step, config, watch) for step in pair]
        if attempt > 1:
            patience.spend(time.perf_counter() - started)
        for record in got:
            record.attempts = attempt
            rates = (idle_rates or {}).get(record.step.side) or {}
            record.idle_cpu_seconds = {group: rate * record.wall_seconds for group, rate in rates.items()}
            _log_run(record, config, log)
        if not best or _disturbance(got) < _disturbance(best):
            best = got
        if _disturbance(best) <= config.noise_limit:
            break
        if attempt == config.max_attempts or patience.exhausted:
            log(f"  kept the least disturbed attempt: others used up to {_disturbance(best):.0%} of the machine")
            break
        log("  other processes disturbed this pair: measuring it again")
    return best


def _disturbance(records: Sequence[RunRecord]) -> float:
    return max(record.foreign_share for record in records)


def _log_run(record: RunRecord, config: CompareConfig, log: Any) -> None:
    summary = summarize(record.results, record.wall_seconds)
    step = record.step
    log(
        f"round {step.round} c={step.concurrency} {step.side:>4}: "
        f"{_fmt(summary['output_throughput'], 1)} tok/s, TTFT p50 {_fmt(summary['ttft_ms_p50'], 1)} ms, "
        f"others used {record.foreign_share:.0%} of the machine"
    )
    if record.foreign_share > config.noise_limit:
        log("    busiest other processes: " + "; ".join(f"{cmd} ({cpu:.1f}s)" for cmd, cpu in record.top_foreign))


def _check_lengths(records: Sequence[RunRecord], max_tokens: int) -> list[str]:
    """Problems that make the comparison unfair: failures, or outputs that did not run to ``max_tokens``."""
    problems = []
    for record in records:
        failed = [r for r in record.results if not r.ok]
        short = [r for r in record.results if r.ok and r.completion_tokens != max_tokens]
        where = f"{record.step.side} c={record.step.concurrency} round {record.step.round}"
        if failed:
            problems.append(f"{where}: {len(failed)} failed ({failed[0].error})")
        if short:
            problems.append(f"{where}: {len(short)} requests generated != {max_tokens} tokens")
    return problems


def _profile_ours(target: Target, config: CompareConfig, out_dir: Path, patience: _proc.Patience) -> dict[str, Any]:
    """One extra run of ``ours`` at the highest level with py-spy on each platform process; returns hot spots."""
    tool = _proc.py_spy()
    if tool is None:
        return {"skipped": "py-spy is not installed (pip install py-spy)"}
    recorders: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for group, procs in target.processes.items():
        for proc in procs[:1]:
            out = out_dir / f"profile-{group}.txt"
            recorders[group] = (
                subprocess.Popen(
                    [
                        tool,
                        "record",
                        "--pid",
                        str(proc.pid),
                        "--rate",
                        str(PROFILE_RATE),
                        "--format",
                        "raw",
                        "--gil",
                        "--output",
                        str(out),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                ),
                out,
            )
    patience.wait_for_quiet(config.quiet_wait)
    time.sleep(0.5)  # py-spy attaches
    step = Step(-1, max(config.concurrency), "ours")
    record = measure(target, step, config)
    tokens = sum(r.completion_tokens for r in record.results if r.ok)
    profile: dict[str, Any] = {
        "concurrency": step.concurrency,
        "tokens": tokens,
        "wall_seconds": record.wall_seconds,
        "rate_hz": PROFILE_RATE,
        "groups": {},
    }
    for group, (recorder, out) in recorders.items():
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
        profile["groups"][group] = hot_spots(out.read_text() if out.is_file() else "", PROFILE_RATE, tokens)
    return profile


# -- orchestration ---------------------------------------------------------------------------------------------
def run_compare(config: CompareConfig, workdir: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Start both servers, warm both up, run the A/B schedule, stop both; returns the JSON-able result."""
    if workdir is not None:
        return _run(config, workdir, log)
    with tempfile.TemporaryDirectory(prefix="xinf-compare-") as tmp:
        return _run(config, Path(tmp), log)


def _run(config: CompareConfig, workdir: Path, log: Any) -> dict[str, Any]:
    patience = _proc.Patience(config.patience)
    with _proc.stopping_later() as later:
        log("starting xinference-local ...")
        platform = later(_proc.start_platform(workdir / "home"))
        before = {p.pid for p in platform.tree()}
        launch_s = _proc.launch_model(platform.api, MODEL_UID, config.launch_options())
        resolved = _proc.engine_config(platform.api, MODEL_UID)
        settings = _proc.EngineSettings.from_engine_config(resolved)
        model_procs = [p for p in platform.tree() if p.pid not in before]
        api_procs = [p for p in platform.tree() if p.pid in before]
        log(f"model launched on the platform in {launch_s:.2f}s with {settings.as_dict()}")
        raw = later(_proc.start_raw_server(settings, workdir / "raw.log"))
        log(f"raw engine serving at {raw.info['address']} (load {raw.load_seconds:.2f}s)")
        raw_procs = raw.tree()
        targets = {
            "raw": Target(
                "raw", raw.api, "raw", {"engine": raw_procs}, {"engine": lambda: _proc.cpu_seconds(raw_procs)}
            ),
            "ours": Target(
                "ours",
                platform.api,
                MODEL_UID,
                {"api": api_procs, "model": model_procs},
                {
                    "api": lambda: _proc.cpu_seconds(api_procs),
                    "model": lambda: _proc.cpu_seconds(model_procs),
                    # the actor's event loop runs on the process's main thread (pulls, (de)serialising, waking)
                    "model_loop": lambda: _proc.thread_cpu_seconds(model_procs[0], model_procs[0].pid),
                },
            ),
        }
        records = run_schedule(targets, config, lambda: [*raw.tree(), *platform.tree()], patience, log)
        profile = _profile_ours(targets["ours"], config, workdir, patience) if config.profile else None
    return {
        **ab_result(config, records),
        "engine_settings": settings.as_dict(),
        "parity_mismatches": _proc.parity_mismatches(settings, resolved),
        "profile": profile,
    }


def run_schedule(
    targets: dict[str, Target],
    config: CompareConfig,
    own: Callable[[], Sequence[psutil.Process]],
    patience: _proc.Patience,
    log: Any,
) -> list[RunRecord]:
    """Warm both sides up, then measure the A/B schedule pair by pair; ``own`` lists every process of both sides.

    Engine-agnostic: the vLLM and MLX comparisons call it with their own targets.
    """
    for side in SIDES:
        log(f"warming up {side} ...")
        warm_up(targets[side], config)
    idle_rates = measure_idle(targets, config.idle_seconds)
    if idle_rates:
        shares = (
            f"{side} {group} {100 * rate:.2f}" for side, rates in idle_rates.items() for group, rate in rates.items()
        )
        log("CPU with no request, % of a core: " + "; ".join(shares))
    watch = _proc.LoadWatch(own)
    records: list[RunRecord] = []
    for pair in pairs(ab_schedule(config.rounds, config.concurrency)):
        records.extend(_measure_pair(pair, targets, config, watch, patience, log, idle_rates))
    return records


def measure_idle(targets: dict[str, Target], seconds: float) -> dict[str, dict[str, float]]:
    """CPU seconds per second that each side's process groups burn with no request (``{}`` when ``seconds`` is 0).

    Why: the per-token CPU figures divide all of a process's CPU by the tokens made, so they include the
    platform's timers (heartbeats, watchers, health checks), which run whether or not a token is made. Reading
    them apart tells how much of a per-token figure the relay can win back at all.
    """
    if seconds <= 0:
        return {}
    before = {side: _cpu_by_group(target) for side, target in targets.items()}
    started = time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - started
    after = {side: _cpu_by_group(target) for side, target in targets.items()}
    return {
        side: {group: max(0.0, after[side][group] - before[side][group]) / wall for group in before[side]}
        for side in targets
    }


def ab_result(config: CompareConfig, records: Sequence[RunRecord]) -> dict[str, Any]:
    """The JSON-able part of a comparison every engine shares: config, levels, problems, each run's figures."""
    levels = summarize_comparison(records, config.concurrency)
    return {
        "config": {**asdict(config), "concurrency": list(config.concurrency)},
        "problems": _check_lengths(records, config.max_tokens),
        "levels": levels,
        "runs": [run_line(record) for record in records],
        "prompt_tokens_equal": all(  # only levels where both sides completed as many requests
            level["raw"]["total_prompt_tokens"] == level["ours"]["total_prompt_tokens"]
            for level in levels
            if level["raw"]["completed"] == level["ours"]["completed"]
        ),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Raw llama.cpp server vs Xinference, same model and settings.")
    defaults = CompareConfig()
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--concurrency", type=parse_concurrency, default=list(defaults.concurrency))
    parser.add_argument("--num-prompts", type=int, default=defaults.num_prompts, help="requests per measured run")
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--n-parallel", type=int, default=defaults.n_parallel)
    parser.add_argument("--n-ctx", type=int, default=defaults.n_ctx)
    parser.add_argument("--n-threads", type=int, default=None, help="default: the platform's choice")
    parser.add_argument("--endpoint", choices=("chat", "completions"), default=defaults.endpoint)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--profile", action="store_true", help="extra unmeasured run of ours under py-spy")
    parser.add_argument(
        "--noise-limit",
        type=float,
        default=defaults.noise_limit,
        help="redo a pair when other processes used more than this share of the machine",
    )
    parser.add_argument("--max-attempts", type=int, default=defaults.max_attempts)
    parser.add_argument("--quiet-wait", type=float, default=defaults.quiet_wait, help="seconds, before each pair")
    parser.add_argument(
        "--patience", type=float, default=defaults.patience, help="extra seconds, in all, for quiet waits and re-runs"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> CompareConfig:
    return CompareConfig(
        rounds=args.rounds,
        concurrency=tuple(args.concurrency),
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        n_parallel=args.n_parallel,
        n_ctx=args.n_ctx,
        n_threads=args.n_threads,
        endpoint=args.endpoint,
        seed=args.seed,
        profile=args.profile,
        noise_limit=args.noise_limit,
        max_attempts=args.max_attempts,
        quiet_wait=args.quiet_wait,
        patience=args.patience,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    result = run_compare(config_from_args(args))
    print()
    print(format_comparison(result["levels"]))
    for problem in result["problems"]:
        print(f"problem: {problem}")
    if result["parity_mismatches"]:
        print(f"engine settings differ (raw, ours): {result['parity_mismatches']}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2, allow_nan=False))
    return 1 if result["problems"] or result["parity_mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
