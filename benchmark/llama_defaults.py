"""Which llama.cpp launch defaults serve the common case best, measured on llama.cpp's own server.

The common case: 1-4 chat users of one model. Every request carries the same system prompt (~300 tokens) and a
fresh user turn; each user's second request repeats its first turn (system, user, assistant, user). Each
configuration of the grid is served by its own ``xllamacpp.Server`` (:mod:`benchmark._raw_server`) on the bundled
SmolLM2-135M GGUF; all servers stay up, idle but one, and every round visits every configuration at c=1 and c=4
in a rotated order, so slow drifts of the machine spread over all of them. Reported per configuration: the median
over rounds of TTFT p50 (all requests, and first vs repeated turns), TPOT p50 and output tokens/s::

    python -m benchmark.llama_defaults --rounds 3 --json-out benchmark/results/defaults.json \\
        --md-out benchmark/results/defaults.md

The grid crosses ``kv_unified`` with ``n_parallel`` and varies batch sizes and the three prompt caches (per-slot
prefix reuse ``cache_prompt``, chunk reuse ``n_cache_reuse``, the host-memory cache ``cache_ram_mib``) one at a
time around the per-slot baseline. ``scripts/gpu_llama_defaults.py`` runs the same on an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/llama_defaults.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import psutil

from benchmark import _proc
from benchmark.bench_serving import build_prompts, send_request
from benchmark.stats import RequestResult, percentile, summarize

__all__ = [
    "Grid",
    "LlamaConfig",
    "Workload",
    "build_grid",
    "main",
    "pick_best",
    "render_markdown",
    "round_order",
    "session_messages",
    "median_metrics",
]

#: The shared system prompt of every request (~300 tokens with SmolLM2's tokenizer; the run reports the count).
SYSTEM_PROMPT = " ".join(
    [
        "You are the support assistant of Northwind Outfitters, a shop that sells hiking, camping and climbing gear.",
        "Answer in a friendly and concise tone, in the language of the customer, and never invent facts.",
        "Orders ship within two working days from our warehouse; standard delivery takes three to five days and",
        "express delivery one to two days. Returns are accepted within thirty days when the item is unused and in its",
        "original packaging; the customer pays the return postage unless the item arrived damaged or wrong.",
        "Refunds reach the original payment method within ten days of the returned item arriving at the warehouse.",
        "Sizing: boots run half a size small, jackets are true to size, and harnesses follow the chart on each page.",
        "Warranty: two years on all gear against manufacturing defects; wear and tear and misuse are not covered.",
        "When a customer asks about an order, ask for the order number, which starts with NW followed by six digits.",
        "Never ask for passwords or full card numbers. If the customer is upset, apologise once and offer help.",
        "For safety questions about climbing equipment, remind the customer to follow the manufacturer's manual and",
        "to retire any rope or harness that has held a severe fall. Do not give medical advice; suggest a doctor.",
        "Store hours are nine to six on weekdays and ten to four on Saturdays; the store is closed on Sundays.",
        "Gift cards never expire and cannot be exchanged for cash. Price matching applies to identical items sold by",
        "a national retailer within fourteen days of purchase. Loyalty members earn one point per euro spent and get",
        "free standard delivery on every order. Keep answers under one hundred words unless the customer asks for",
        "more detail, and end each answer by asking whether there is anything else you can help with today.",
    ]
)
#: The assistant turn sent back in a user's second request. A fixed text, not what the model wrote, so the
#: prefix a slot can reuse ends with the first user turn: cache benefits are, if anything, understated.
ASSISTANT_REPLY = "Thanks for asking! Here is a short answer. Is there anything else I can help you with today?"


@dataclass(frozen=True)
class LlamaConfig:
    """One point of the grid: the llama.cpp options that differ between points (``None``: llama.cpp's own)."""

    name: str
    kv_unified: bool
    n_parallel: int
    n_batch: int | None = None
    n_ubatch: int | None = None
    cache_prompt: bool = True
    cache_reuse: int | None = None
    cache_ram_mib: int | None = None

    def settings(self, *, n_ctx: int, threads: int, n_gpu_layers: int = 0) -> _proc.EngineSettings:
        return _proc.EngineSettings(
            n_ctx=n_ctx,
            n_parallel=self.n_parallel,
            n_threads=threads,
            n_threads_batch=threads,
            kv_unified=self.kv_unified,
            cache_prompt=self.cache_prompt,
            n_gpu_layers=n_gpu_layers,
        )

    def extra_args(self) -> list[str]:
        """The raw server's arguments for the options :class:`_proc.EngineSettings` does not carry."""
        args: list[str] = []
        for flag, value in (
            ("--n-batch", self.n_batch),
            ("--n-ubatch", self.n_ubatch),
            ("--cache-reuse", self.cache_reuse),
            ("--cache-ram", self.cache_ram_mib),
        ):
            if value is not None:
                args += [flag, str(value)]
        return args


@dataclass(frozen=True)
class Grid:
    """What to sweep: ``n_parallel`` values crossed with ``kv_unified``; batch pairs and caches one at a time."""

    n_parallels: tuple[int, ...] = (1, 2, 4, 8)
    base_parallel: int = 4
    #: llama.cpp's own 2048/512 holds a ~400-token prompt in one micro-batch; smaller ones split it
    batches: tuple[tuple[int, int], ...] = ((256, 128),)
    cache_reuse: int = 256


def build_grid(grid: Grid = Grid()) -> list[LlamaConfig]:
    """Configurations to measure: ``kv_unified`` on/off × every ``n_parallel`` (one slot only once: with one slot
    the two layouts are the same), then, on the per-slot baseline (``n_parallel=grid.base_parallel``), each batch
    pair and each prompt-cache switch alone. Names are unique."""
    if grid.base_parallel not in grid.n_parallels or grid.base_parallel < 2:
        raise ValueError(f"base_parallel {grid.base_parallel} must be one of {grid.n_parallels} and above 1")
    configs = [LlamaConfig("np=1", False, 1)] if 1 in grid.n_parallels else []
    configs += [
        LlamaConfig(f"{'unified' if unified else 'per-slot'} np={n}", unified, n)
        for unified in (True, False)
        for n in grid.n_parallels
        if n > 1
    ]
    base = LlamaConfig(f"per-slot np={grid.base_parallel}", False, grid.base_parallel)
    for n_batch, n_ubatch in grid.batches:
        configs.append(
            replace(base, name=f"{base.name} batch={n_batch}/{n_ubatch}", n_batch=n_batch, n_ubatch=n_ubatch)
        )
    configs.append(replace(base, name=f"{base.name} no cache_prompt", cache_prompt=False))
    configs.append(replace(base, name=f"{base.name} no cache_ram", cache_ram_mib=0))
    configs.append(replace(base, name=f"{base.name} cache_reuse={grid.cache_reuse}", cache_reuse=grid.cache_reuse))
    return configs


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """The order configurations are measured in round ``round_index``: rotated by one more each round, so every
    configuration takes every position (first after an idle spell, last in a long busy stretch) equally often."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


# -- the workload --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """Chat users with a shared system prompt; each session is two requests, the second repeating the first turn."""

    max_tokens: int = 16
    sessions_c1: int = 2  # sessions of the single user at c=1
    sessions_per_user_c4: int = 1
    concurrency: tuple[int, ...] = (1, 4)


def session_messages(first: str, second: str, turn: int) -> list[dict[str, str]]:
    """Messages of turn 1 or 2 of a session whose user asks ``first`` then ``second``."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": first}]
    if turn == 1:
        return messages
    if turn != 2:
        raise ValueError(f"a session has turns 1 and 2, got {turn}")
    return [*messages, {"role": "assistant", "content": ASSISTANT_REPLY}, {"role": "user", "content": second}]


def user_questions(users: int, sessions: int, seed: int) -> list[list[tuple[str, str]]]:
    """``users`` lists of ``sessions`` (first, second) question pairs, fresh for each ``seed`` (round)."""
    prompts = build_prompts(users * sessions * 2, seed)
    pairs = list(zip(prompts[::2], prompts[1::2], strict=True))
    return [pairs[u * sessions : (u + 1) * sessions] for u in range(users)]


async def run_users(
    api: str, questions: list[list[tuple[str, str]]], max_tokens: int, timeout: float = 300.0
) -> tuple[list[tuple[int, RequestResult]], float]:
    """Every user runs its sessions back to back, all users at once; returns (turn, result) pairs and the wall."""
    url = api.rstrip("/") + "/chat/completions"
    limits = httpx.Limits(max_connections=len(questions), max_keepalive_connections=len(questions))
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:

        async def user(sessions: list[tuple[str, str]]) -> list[tuple[int, RequestResult]]:
            done: list[tuple[int, RequestResult]] = []
            for first, second in sessions:
                for turn in (1, 2):
                    body = {
                        "model": "bench",
                        "messages": session_messages(first, second, turn),
                        "max_tokens": max_tokens,
                        "temperature": 0,
                        "stream": True,
                        "ignore_eos": True,
                        "stream_options": {"include_usage": True},
                    }
                    done.append((turn, await send_request(client, url, body, "chat")))
            return done

        started = time.perf_counter()
        per_user = await asyncio.gather(*map(user, questions))
        wall = time.perf_counter() - started
    return [item for items in per_user for item in items], wall


def run_metrics(results: Sequence[tuple[int, RequestResult]], wall: float) -> dict[str, Any]:
    """The figures kept per run: :func:`summarize`'s, plus TTFT p50 of first and of repeated turns apart."""
    summary = summarize([r for _, r in results], wall)
    metrics: dict[str, Any] = {
        key: summary[key]
        for key in ("completed", "errors", "ttft_ms_p50", "tpot_ms_p50", "output_throughput", "total_prompt_tokens")
    }
    for turn in (1, 2):
        ttfts = [r.ttft for t, r in results if t == turn and r.ok and r.ttft is not None]
        metrics[f"ttft_turn{turn}_ms_p50"] = percentile(ttfts, 50) * 1000 if ttfts else None
    if summary["error_samples"]:
        metrics["error_samples"] = summary["error_samples"]
    return metrics


def prefilled_tokens(log_text: str) -> list[int]:
    """Prompt tokens llama.cpp actually computed per request, read from its log (``prompt eval time = ... / N
    tokens``): the part of each prompt no cache covered. Unlike times, it does not depend on the machine's load."""
    return [int(match) for match in _PROMPT_EVAL.findall(log_text)]


_PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


# -- results -----------------------------------------------------------------------------------------------------
MEDIAN_KEYS = ("ttft_ms_p50", "ttft_turn1_ms_p50", "ttft_turn2_ms_p50", "tpot_ms_p50", "output_throughput")


def median_metrics(rounds: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Median over rounds of each figure in :data:`MEDIAN_KEYS` (rounds that lack it are left out)."""
    medians: dict[str, float | None] = {}
    for key in MEDIAN_KEYS:
        values = [r[key] for r in rounds if r.get(key) is not None]
        medians[key] = statistics.median(values) if values else None
    return medians


def _log_ratio(better_high: float | None, baseline: float | None) -> float:
    if not better_high or not baseline:
        return -math.inf
    return math.log(better_high / baseline)


def scores(medians: dict[str, dict[int, dict[str, float | None]]], baseline: str) -> dict[str, float]:
    """Each configuration against ``baseline``: the mean log-ratio of tokens/s at every concurrency and of TTFT
    p50 (inverted: lower is better) at every concurrency. 0 is the baseline; +0.1 is ~10% better on average. A
    configuration missing a figure scores -inf."""
    base = medians[baseline]
    result: dict[str, float] = {}
    for name, by_c in medians.items():
        terms: list[float] = []
        for c, figures in by_c.items():
            terms.append(_log_ratio(figures.get("output_throughput"), base[c].get("output_throughput")))
            ttft, base_ttft = figures.get("ttft_ms_p50"), base[c].get("ttft_ms_p50")
            terms.append(_log_ratio(base_ttft, ttft) if ttft else -math.inf)
        result[name] = sum(terms) / len(terms) if terms else -math.inf
    return result


def pick_best(medians: dict[str, dict[int, dict[str, float | None]]], baseline: str) -> tuple[str, dict[str, float]]:
    """The configuration with the highest :func:`scores` (the baseline on a tie), and every score."""
    by_name = scores(medians, baseline)
    best = max(by_name, key=lambda name: (by_name[name], name == baseline))
    return best, by_name


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_markdown(report: dict[str, Any]) -> str:
    """The result page: the machine and settings, a table of medians per configuration and concurrency."""
    levels = report["workload"]["concurrency"]
    lines = [
        "# llama.cpp launch defaults, measured",
        "",
        f"Model: {report['model']}; {report['machine']}; xllamacpp {report['xllamacpp']}; "
        f"{report['rounds']} rounds, medians over rounds; others' load during the run: "
        f"{_fmt(report['foreign_share'] * 100, 0)}% of the machine.",
        f"Workload: a ~{report['system_prompt_tokens']}-token system prompt shared by every request, a fresh user "
        f"turn, each session's 2nd request repeating its 1st turn; {report['workload']['max_tokens']} tokens per "
        "answer (ignore_eos). Score: mean log-ratio of tok/s and 1/TTFT p50 at every concurrency against "
        f"`{report['baseline']}` (+0.10 is ~10% better).",
        "",
        "| configuration | score | "
        + " | ".join(f"c={c} tok/s | c={c} TTFT p50 | c={c} TTFT turn1/turn2 | c={c} TPOT p50" for c in levels)
        + " |",
        "|---|---:|" + "---:|---:|---:|---:|" * len(levels),
    ]
    for name, by_c in sorted(report["medians"].items(), key=lambda item: -report["scores"][item[0]]):
        cells = [name + (" **best**" if name == report["best"] else ""), f"{report['scores'][name]:+.3f}"]
        for c in levels:
            m = by_c[str(c)] if str(c) in by_c else by_c[c]
            cells += [
                _fmt(m["output_throughput"]),
                _fmt(m["ttft_ms_p50"]),
                f"{_fmt(m['ttft_turn1_ms_p50'])} / {_fmt(m['ttft_turn2_ms_p50'])}",
                _fmt(m["tpot_ms_p50"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    prefill = report.get("prefill") or {}
    if prefill:
        lines += [
            "",
            "Prompt tokens llama.cpp computed (not served from a cache), every request of the run (warm-up "
            "included, the same requests on every server): independent of the machine's load.",
            "",
            "| configuration | requests | prompt tokens computed | per request |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {p['requests']} | {p['prefilled_tokens']} | {p['per_request']:.0f} |"
            for name, p in sorted(prefill.items(), key=lambda item: item[1]["prefilled_tokens"])
        ]
    lines += ["", "Times in ms. Measured on a shared machine: treat differences under ~10% as noise.", ""]
    return "\n".join(lines)


# -- running ------------------------------------------------------------------------------------------------------
@dataclass
class Sweep:
    """Settings of one run of the sweep (the CLI's options)."""

    configs: list[LlamaConfig]
    workload: Workload = field(default_factory=Workload)
    rounds: int = 3
    n_ctx: int = 8192
    threads: int = 2
    n_gpu_layers: int = 0
    model: Path | None = None
    baseline: str = "unified np=4"


def _start(config: LlamaConfig, sweep: Sweep, log_dir: Path) -> _proc.RawServer:
    settings = config.settings(n_ctx=sweep.n_ctx, threads=sweep.threads, n_gpu_layers=sweep.n_gpu_layers)
    extended = _ExtendedSettings(**settings.as_dict(), extra=tuple(config.extra_args()))
    log = log_dir / (config.name.replace(" ", "_").replace("/", "-").replace("=", "") + ".log")
    return _proc.start_raw_server(extended, log, model_path=sweep.model)


@dataclass(frozen=True)
class _ExtendedSettings(_proc.EngineSettings):
    extra: tuple[str, ...] = ()

    def to_args(self) -> list[str]:
        return [*super().to_args(), *self.extra]


def _prompt_tokens(api: str) -> int:
    """Tokens of the system prompt in the served model's chat template (one 1-token request)."""
    body = {
        "model": "bench",
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "hi"}],
        "max_tokens": 1,
    }
    with _proc.http_client() as client:
        usage = client.post(f"{api}/chat/completions", json=body).json().get("usage") or {}
    return int(usage.get("prompt_tokens") or 0)


def run_sweep(sweep: Sweep, on_round: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Start every configuration's server, warm each up, then measure round after round; stops them all.

    ``on_round`` gets the report so far after every round (a long run on a busy machine leaves usable results
    even when it is stopped early)."""
    names = [c.name for c in sweep.configs]
    if sweep.baseline not in names:
        raise ValueError(f"baseline {sweep.baseline!r} is not in the grid")
    raw: dict[str, dict[int, list[dict[str, Any]]]] = {n: {c: [] for c in sweep.workload.concurrency} for n in names}
    busy_before, started = _proc.busy_cpu_seconds(), time.perf_counter()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="llama-defaults-") as tmp, _proc.stopping_later() as later:
        servers = {c.name: later(_start(c, sweep, Path(tmp))) for c in sweep.configs}
        prompt_tokens = _prompt_tokens(servers[names[0]].api)
        for name, server in servers.items():  # warm-up: the system prompt is cached, as in steady use
            asyncio.run(run_users(server.api, user_questions(1, 1, 99_999), 4))
            print(f"started {name}", file=sys.stderr)
        for round_index in range(sweep.rounds):
            for name in round_order(names, round_index):
                for c in sweep.workload.concurrency:
                    sessions = sweep.workload.sessions_c1 if c == 1 else sweep.workload.sessions_per_user_c4
                    questions = user_questions(c, sessions, seed=round_index * 100 + c)
                    results, wall = asyncio.run(run_users(servers[name].api, questions, sweep.workload.max_tokens))
                    raw[name][c].append(run_metrics(results, wall))
                print(
                    f"round {round_index + 1}: {name}: "
                    f"{[round(raw[name][c][-1]['output_throughput'] or 0, 1) for c in raw[name]]} tok/s",
                    file=sys.stderr,
                )
            own_cpu = _proc.cpu_seconds([p for s in servers.values() for p in s.tree()] + [psutil.Process()])
            wall = time.perf_counter() - started
            foreign = _proc.foreign_share(_proc.busy_cpu_seconds() - busy_before, own_cpu, wall, psutil.cpu_count())
            report = _report(
                sweep,
                raw,
                round_index + 1,
                prompt_tokens,
                foreign,
                wall,
                servers[names[0]].info.get("xllamacpp", "unknown"),
            )
            report["prefill"] = {name: _prefill_summary(server.log_path) for name, server in servers.items()}
            if on_round is not None:
                on_round(report)
    return report


def _prefill_summary(log_path: Path) -> dict[str, float]:
    """Requests served so far (warm-up included: the same number on every server) and prompt tokens computed."""
    try:
        counts = prefilled_tokens(log_path.read_text(errors="replace"))
    except OSError:
        counts = []
    return {
        "requests": len(counts),
        "prefilled_tokens": sum(counts),
        "per_request": sum(counts) / len(counts) if counts else 0.0,
    }


def _report(
    sweep: Sweep,
    raw: dict[str, dict[int, list[dict[str, Any]]]],
    rounds: int,
    prompt_tokens: int,
    foreign: float,
    wall: float,
    xllamacpp_version: str,
) -> dict[str, Any]:
    medians = {n: {c: median_metrics(runs) for c, runs in by_c.items()} for n, by_c in raw.items()}
    best, by_name = pick_best(medians, sweep.baseline)
    return {
        "model": str(sweep.model or _proc.bundled_gguf().name),
        "xllamacpp": xllamacpp_version,
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, threads={sweep.threads}, "
        f"n_gpu_layers={sweep.n_gpu_layers}, n_ctx={sweep.n_ctx}",
        "rounds": rounds,
        "workload": asdict(sweep.workload),
        "system_prompt_tokens": prompt_tokens,
        "baseline": sweep.baseline,
        "best": best,
        "scores": by_name,
        "foreign_share": foreign,
        "wall_seconds": wall,
        "configs": [asdict(c) for c in sweep.configs],
        "medians": medians,
        "runs": raw,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Sweep llama.cpp launch options on the common chat workload.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=psutil.cpu_count(logical=True) or 1)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--only", default=None, help="comma list of configuration names to keep (and the baseline)")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--md-out", type=Path, default=None)
    return parser.parse_args(argv)


def write_outputs(report: dict[str, Any], json_out: Path | None, md_out: Path | None) -> None:
    """Print the page and write the JSON and markdown outputs (each call replaces the last)."""
    text = render_markdown(report)
    print(text)
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    if md_out is not None:
        md_out.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (also called by ``benchmark.run_all``): runs the CPU grid, prints and writes the report."""
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    configs = build_grid()
    sweep = Sweep(
        configs, Workload(max_tokens=args.max_tokens), rounds=args.rounds, n_ctx=args.n_ctx, threads=args.threads
    )
    if args.only:
        keep = {name.strip() for name in args.only.split(",")} | {sweep.baseline}
        sweep.configs = [c for c in configs if c.name in keep]
    report = run_sweep(sweep, on_round=lambda so_far: write_outputs(so_far, args.json_out, args.md_out))
    return 0 if all(r["errors"] == 0 for by_c in report["runs"].values() for rs in by_c.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
