"""Every benchmark in one go, with small defaults, written up next to DESIGN §6's targets.

    python -m benchmark.run_all            # ~5 minutes on 2 idle cores
    python -m benchmark.run_all --rounds 3 --num-prompts 24

Runs :mod:`benchmark.bench_control_plane` and :mod:`benchmark.compare_engine` (which start and stop their own
servers), then writes ``benchmark/results/latest.json`` (every figure) and ``benchmark/results/latest.md`` (machine
facts, the figures, each target with met/missed, and the gaps). The hand-written part of ``latest.md`` between
``<!-- notes -->`` and ``<!-- /notes -->`` (profile findings, proposed fixes) is kept when the file is rewritten.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/run_all.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmark import _proc
from benchmark.bench_batching import run_batching
from benchmark.bench_control_plane import ControlPlaneConfig, median_or_none, run_control_plane
from benchmark.bench_serving import parse_concurrency
from benchmark.compare_engine import CompareConfig, run_compare

RESULTS_DIR = Path(__file__).resolve().parent / "results"
NOTES_START = "<!-- notes -->"
NOTES_END = "<!-- /notes -->"
DEFAULT_NOTES = "_No profile findings recorded yet._"


# -- targets -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One figure held against its target; ``met`` is ``None`` when the figure could not be measured."""

    name: str
    value: float | None
    target: str
    met: bool | None
    unit: str = ""
    detail: str = ""

    @property
    def status(self) -> str:
        return "n/a" if self.met is None else ("met" if self.met else "MISSED")


def _check(value: float | None, ok: Callable[[float], bool]) -> bool | None:
    return None if value is None else ok(value)


def evaluate_targets(report: dict[str, Any]) -> list[Verdict]:
    """DESIGN §6 as numbers: engine parity per concurrency level, then the control plane."""
    verdicts: list[Verdict] = []
    slots = ((report.get("compare") or {}).get("engine_settings") or {}).get("n_parallel", 0)
    for level in (report.get("compare") or {}).get("levels", []):
        c = level["concurrency"]
        ratio = level["compare"]["output_throughput_ratio"]
        added = level["compare"]["ttft_p50_added_ms"]
        cpu = level["platform_cpu_ms_per_token"]["total"]
        verdicts += [
            Verdict(f"output tok/s ours/raw, c={c}", ratio, ">= 0.98", _check(ratio, lambda v: v >= 0.98), "x"),
            Verdict(
                f"TTFT p50 added, c={c}",
                added,
                "<= +3 ms",
                _check(added, lambda v: v <= 3.0),
                "ms",
                "includes waiting for a free slot (c > n_parallel): grows with any TPOT loss" if c > slots else "",
            ),
            Verdict(
                f"platform CPU per output token, c={c}",
                cpu,
                "< 0.3 ms",
                _check(cpu, lambda v: v < 0.3),
                "ms",
                "API process + model actor's event loop (lower bound)",
            ),
        ]
    control = report.get("control_plane")
    if control:
        ready = control.get("ready_seconds_median")
        verdicts.append(
            Verdict("xinference-local ready (median)", ready, "<= 3 s", _check(ready, lambda v: v <= 3), "s")
        )
        launch, load = control.get("launch_seconds_median"), control.get("engine_load_seconds_median")
        budget = None if load is None else load + 1.0
        verdicts.append(
            Verdict(
                "model launch (median)",
                launch,
                "<= engine load + 1 s" + (f" = {budget:.2f} s" if budget is not None else ""),
                None if launch is None or budget is None else launch <= budget,
                "s",
            )
        )
        idle = (control.get("idle") or {}).get("rss_mb")
        verdicts.append(
            Verdict("idle RSS of the platform's processes", idle, "<= 300 MiB", _check(idle, lambda v: v <= 300), "MiB")
        )
    batching = report.get("batching")
    if batching:
        emb, tf = batching["embeddings"], batching["transformers"]
        verdicts += [
            Verdict("embeddings req/s, c=16 / c=1", emb["ratio"], ">= 3", _check(emb["ratio"], lambda v: v >= 3), "x"),
            Verdict("Transformers tok/s, c=8 / c=1", tf["ratio_c8_c1"], ">= 3",
                    _check(tf["ratio_c8_c1"], lambda v: v >= 3), "x"),
        ]
    return verdicts


# -- machine -------------------------------------------------------------------------------------------------------
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False, cwd=RESULTS_DIR.parent
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def machine_facts() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": usable,
        "cores_physical": psutil.cpu_count(logical=False),
        "ram_gib": psutil.virtual_memory().total / (1 << 30),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "xinference": _version("xinference"),
        "xllamacpp": _version("xllamacpp"),
        "xoscar": _version("xoscar"),
        "torch": _version("torch"),  # xoscar imports it in every actor pool when installed
        "commit": _git("rev-parse", "--short", "HEAD"),
        "tree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "load_average_start": list(os.getloadavg()),
    }


# -- markdown ------------------------------------------------------------------------------------------------------
def extract_notes(markdown: str) -> str | None:
    """The hand-written text between the notes markers of an earlier ``latest.md``, ``None`` when absent."""
    start = markdown.find(NOTES_START)
    end = markdown.find(NOTES_END, start + len(NOTES_START))
    if start < 0 or end < 0:
        return None
    return markdown[start + len(NOTES_START) : end].strip("\n")


def _n(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _machine_section(machine: dict[str, Any]) -> list[str]:
    load = machine.get("load_average_start") or []
    end = machine.get("load_average_end") or []
    return [
        "## Machine",
        "",
        f"- date: {machine['date']}; commit {machine.get('commit') or '?'}"
        + (" (with uncommitted changes)" if machine.get("tree_dirty") else ""),
        f"- CPU: {machine['cpu']}, {machine['cores']} usable cores ({machine.get('cores_physical')} physical); "
        f"RAM {machine['ram_gib']:.1f} GiB; {machine['os']}",
        f"- Python {machine['python']}; xinference {machine['xinference']}, xllamacpp {machine['xllamacpp']}, "
        f"xoscar {machine['xoscar']}; torch {machine.get('torch', '?')}",
        f"- load average (1/5/15 min) at start {' / '.join(_n(v) for v in load)}"
        + (f", at end {' / '.join(_n(v) for v in end)}" if end else ""),
        "",
    ]


def _targets_section(verdicts: Sequence[Verdict]) -> list[str]:
    rows = [
        [v.name, f"{_n(v.value, 3 if v.unit == 'x' else 2)} {v.unit}".strip(), v.target, f"**{v.status}**", v.detail]
        for v in verdicts
    ]
    return ["## Targets (DESIGN §6)", "", *_table(["figure", "measured", "target", "", "note"], rows), ""]


def _compare_section(compare: dict[str, Any]) -> list[str]:
    config = compare["config"]
    settings = compare["engine_settings"]
    lines = [
        "## Raw engine vs the platform",
        "",
        f"Same GGUF (SmolLM2-135M-Instruct Q4_1), same engine settings on both sides (n_ctx {settings['n_ctx']}, "
        f"n_parallel {settings['n_parallel']}, threads {settings['n_threads']}/{settings['n_threads_batch']}, "
        f"kv_unified {settings['kv_unified']}, flash_attn {settings['flash_attn']}), {config['endpoint']} endpoint, "
        f"streamed, temperature 0, ignore_eos, max_tokens {config['max_tokens']}, {config['num_prompts']} requests "
        f"per run, {config['rounds']} rounds of raw/ours alternating at each level; warm-up excluded. "
        "Raw = llama.cpp's own HTTP server (`xllamacpp.Server`); ours = `xinference-local` → model subprocess.",
        "",
    ]
    rows = []
    for level in compare["levels"]:
        raw, ours, cmp = level["raw"], level["ours"], level["compare"]
        rows.append(
            [
                str(level["concurrency"]),
                _n(raw["output_throughput"], 1),
                _n(ours["output_throughput"], 1),
                _n(cmp["output_throughput_ratio"], 3),
                ", ".join(_n(r["output_throughput_ratio"], 3) for r in level["rounds"]),
                f"{_n(raw['ttft_ms_p50'], 1)} / {_n(ours['ttft_ms_p50'], 1)}",
                _n(cmp["ttft_p50_added_ms"], 2, sign=True),
                f"{_n(raw['tpot_ms_p50'])} / {_n(ours['tpot_ms_p50'])}",
                _n(cmp["tpot_p50_ratio"], 3),
                f"{level['max_foreign_share']:.0%}",
            ]
        )
    lines += _table(
        [
            "c",
            "raw tok/s",
            "ours tok/s",
            "ratio",
            "per round",
            "TTFT p50 ms raw / ours",
            "TTFT added ms",
            "TPOT p50 ms raw / ours",
            "TPOT ratio",
            "others' load (max)",
        ],
        rows,
    )
    cpu_rows = []
    for level in compare["levels"]:
        cpu, extra = level["cpu_ms_per_token"], level["platform_cpu_ms_per_token"]
        deliveries = level.get("chunks_per_delivery") or {}
        cpu_rows.append(
            [
                str(level["concurrency"]),
                _n(cpu["raw"].get("engine"), 3),
                _n(cpu["ours"].get("model"), 3),
                _n(extra["model_minus_raw"], 3, sign=True),
                _n(extra["api"], 3),
                _n(extra["model_loop"], 3),
                f"**{_n(extra['total'], 3)}**",
                f"{_n(deliveries.get('raw'))} / {_n(deliveries.get('ours'))}",
            ]
        )
    lines += [
        "",
        "Server CPU per output token (ms; psutil). The platform's own share is the API process plus the model "
        "actor's event loop (the model process's main thread); the model process as a whole also includes the "
        "engine's threads, which burn more when each token takes longer. Chunks per delivery: streamed chunks "
        "that reached the client together (1.00 = one write, and on the platform one actor pull, per token).",
        "",
        *_table(
            [
                "c",
                "raw engine process",
                "ours: model process",
                "model - raw",
                "ours: API process",
                "ours: model event loop",
                "platform total",
                "chunks per delivery raw / ours",
            ],
            cpu_rows,
        ),
        "",
    ]
    if compare.get("problems"):
        lines += ["Problems: " + "; ".join(compare["problems"]), ""]
    if compare.get("parity_mismatches"):
        lines += [f"Engine settings differ (raw, ours): `{compare['parity_mismatches']}`", ""]
    if not compare.get("prompt_tokens_equal", True):
        lines += ["Prompt token totals differ between the sides (different chat templating?).", ""]
    return lines


def _profile_section(profile: dict[str, Any] | None) -> list[str]:
    if not profile:
        return []
    if "skipped" in profile:
        return [f"Profile: skipped ({profile['skipped']}).", ""]
    lines = [
        f"### Profile of the platform at c={profile['concurrency']} (py-spy --gil, {profile['rate_hz']} Hz, "
        f"{profile['tokens']} tokens, one extra unmeasured run)",
        "",
        "Time a thread held the GIL, per output token (µs). `self` = in that function itself.",
        "",
    ]
    for group, spots in profile["groups"].items():
        rows = [
            [entry["function"].replace("|", "\\|"), _n(entry["us_per_token"], 1), f"{entry['share']:.0%}"]
            for entry in spots["self"]
        ]
        lines += [
            f"**{group} process**: {_n(spots['busy_us_per_token'], 1)} µs of GIL-holding Python per token",
            "",
            *_table(["function (self)", "µs/token", "share"], rows),
            "",
        ]
    return lines


def _control_section(control: dict[str, Any]) -> list[str]:
    ready = control["ready_seconds"]
    logged = [v for v in control.get("ready_logged_seconds", []) if v is not None]
    launch_logged = [v for v in control.get("model_logged_load_seconds", []) if v is not None]
    idle, after, model, raw = (
        control["idle"],
        control["platform_after_launch"],
        control["model_process"],
        control["raw_engine_process"],
    )
    rows = [
        [
            "time to ready, spawn → /status 200",
            ", ".join(_n(v) for v in ready) + " s",
            f"{_n(median_or_none(ready))} s",
        ],
        [
            "  of which the server logs (pool, actors, HTTP)",
            ", ".join(_n(v) for v in logged) + " s",
            f"{_n(median_or_none(logged))} s",
        ],
        [
            "model launch, POST /v1/models wall",
            ", ".join(_n(v) for v in control["launch_seconds"]) + " s",
            f"{_n(control['launch_seconds_median'])} s",
        ],
        [
            "  of which the model process logs (engine load)",
            ", ".join(_n(v) for v in launch_logged) + " s",
            f"{_n(median_or_none(launch_logged))} s",
        ],
        ["  first launch after start (not in the median)", f"{_n(control['launch_first_seconds'])} s", ""],
        [
            "bare engine load, xllamacpp.Server(params)",
            ", ".join(_n(v) for v in control["engine_load_seconds"]) + " s",
            f"{_n(control['engine_load_seconds_median'])} s",
        ],
        [
            "  fresh process start → serving",
            ", ".join(_n(v) for v in control["engine_process_ready_seconds"]) + " s",
            f"{_n(control['engine_process_ready_seconds_median'])} s",
        ],
        ["idle platform, RSS / USS", f"{_n(idle['rss_mb'], 0)} / {_n(idle['uss_mb'], 0)} MiB", ""],
        [
            "platform after a launch (model apart), RSS / USS",
            f"{_n(after['rss_mb'], 0)} / {_n(after['uss_mb'], 0)} MiB",
            "",
        ],
        ["model subprocess, RSS / USS", f"{_n(model['rss_mb'], 0)} / {_n(model['uss_mb'], 0)} MiB", ""],
        ["raw engine process, RSS / USS", f"{_n(raw['rss_mb'], 0)} / {_n(raw['uss_mb'], 0)} MiB", ""],
    ]
    for key, label in (("list_models_ms", "GET /v1/models"), ("status_ms", "GET /status")):
        stats = control.get(key)
        if stats:
            rows.append(
                [f"{label} latency, {stats['n']} calls", f"p50 {_n(stats['p50'])} / p99 {_n(stats['p99'])} ms", ""]
            )
    tiny = control.get("tiny_completion")
    if tiny:
        rows.append(
            [
                f"1-token non-streamed chat, {tiny['raw_ms']['n']} calls each, p50 raw / ours",
                f"{_n(tiny['raw_ms']['p50'])} / {_n(tiny['ours_ms']['p50'])} ms",
                f"{_n(tiny['added_p50_ms'], 2, sign=True)} ms",
            ]
        )
    return ["## Control plane", "", *_table(["figure", "runs", "median / result"], rows), ""]


def _batching_section(batching: dict[str, Any]) -> list[str]:
    emb, tf = batching["embeddings"], batching["transformers"]
    return [
        "## Batching (through the platform, over HTTP)",
        "",
        *_table(
            ["workload", "c=1", "c=4", "c=8", "c=16", "ratio"],
            [
                ["embeddings (all-MiniLM-L6-v2), req/s", _n(emb["c1_req_s"], 1), "", "", _n(emb["c16_req_s"], 1),
                 _n(emb["ratio"]) + " x"],
                ["Transformers (SmolLM2-135M, max_num_seqs 8), output tok/s", _n(tf["c1_tok_s"], 1),
                 _n(tf["c4_tok_s"], 1), _n(tf["c8_tok_s"], 1), "", _n(tf["ratio_c8_c1"]) + " x"],
            ],
        ),
        "",
    ]


def render_markdown(report: dict[str, Any], notes: str | None = None) -> str:
    """``latest.md`` from a :func:`run` report; ``notes`` is the preserved hand-written findings."""
    verdicts = evaluate_targets(report)
    missed = [v for v in verdicts if v.met is False]
    lines = [
        "# Benchmark results",
        "",
        "Written by `python -m benchmark.run_all` (see `benchmark/README.md`); the notes section at the end is "
        "hand-written and kept across runs.",
        "",
        *_machine_section(report["machine"]),
        *_targets_section(verdicts),
    ]
    if report.get("compare"):
        lines += _compare_section(report["compare"])
        lines += _profile_section(report["compare"].get("profile"))
    if report.get("control_plane"):
        lines += _control_section(report["control_plane"])
    if report.get("batching"):
        lines += _batching_section(report["batching"])
    lines += ["## Gaps", ""]
    if missed:
        lines += [f"- {v.name}: {_n(v.value, 3 if v.unit == 'x' else 2)} {v.unit}, target {v.target}" for v in missed]
    else:
        lines.append("- none: every measured target is met.")
    noisy = report.get("noise_warning")
    if noisy:
        lines += ["", f"> {noisy}"]
    lines += ["", "### Profile findings and proposed fixes", "", NOTES_START, notes or DEFAULT_NOTES, NOTES_END, ""]
    return "\n".join(lines)


# -- running -------------------------------------------------------------------------------------------------------
def noise_warning(report: dict[str, Any], limit: float) -> str | None:
    """A caution when other processes loaded the machine during measured runs despite the retries."""
    levels = (report.get("compare") or {}).get("levels", [])
    worst = max((level["max_foreign_share"] for level in levels), default=0.0)
    if worst > limit:
        return (
            f"Other processes used up to {worst:.0%} of the machine during some measured runs (limit {limit:.0%}, "
            "after retries): treat the engine-vs-platform figures as noisy."
        )
    return None


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine_facts()}
    started = time.perf_counter()
    if not args.skip_control_plane:
        log("== control plane ==")
        report["control_plane"] = run_control_plane(
            ControlPlaneConfig(
                ready_runs=args.ready_runs,
                launch_runs=args.launch_runs,
                list_calls=args.list_calls,
                tiny_calls=args.tiny_calls,
                n_parallel=args.n_parallel,
                n_ctx=args.n_ctx,
                patience=args.patience / 3,
            ),
            log=log,
        )
    if not args.skip_compare:
        log("== raw engine vs platform ==")
        profile = args.profile == "on" or (args.profile == "auto" and _proc.py_spy() is not None)
        compare_config = CompareConfig(
            rounds=args.rounds,
            concurrency=tuple(args.concurrency),
            num_prompts=args.num_prompts,
            max_tokens=args.max_tokens,
            n_parallel=args.n_parallel,
            n_ctx=args.n_ctx,
            profile=profile,
            noise_limit=args.noise_limit,
            patience=args.patience * 2 / 3,
        )
        report["compare"] = run_compare(compare_config, log=log)
    if not args.skip_batching:
        log("== batching: embeddings and Transformers ==")
        report["batching"] = run_batching()
    report["machine"]["load_average_end"] = list(os.getloadavg())
    report["duration_seconds"] = time.perf_counter() - started
    report["targets"] = [
        {"name": v.name, "value": v.value, "unit": v.unit, "target": v.target, "status": v.status}
        for v in evaluate_targets(report)
    ]
    report["noise_warning"] = noise_warning(report, args.noise_limit)
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    compare, control = CompareConfig(), ControlPlaneConfig()
    parser = argparse.ArgumentParser(description="Run every benchmark and write benchmark/results/latest.{md,json}.")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--rounds", type=int, default=compare.rounds)
    parser.add_argument("--concurrency", type=parse_concurrency, default=list(compare.concurrency))
    parser.add_argument("--num-prompts", type=int, default=compare.num_prompts)
    parser.add_argument("--max-tokens", type=int, default=compare.max_tokens)
    parser.add_argument("--n-parallel", type=int, default=compare.n_parallel)
    parser.add_argument("--n-ctx", type=int, default=compare.n_ctx)
    parser.add_argument("--ready-runs", type=int, default=control.ready_runs)
    parser.add_argument("--launch-runs", type=int, default=control.launch_runs)
    parser.add_argument("--list-calls", type=int, default=control.list_calls)
    parser.add_argument("--tiny-calls", type=int, default=control.tiny_calls)
    parser.add_argument("--noise-limit", type=float, default=compare.noise_limit)
    parser.add_argument(
        "--patience",
        type=float,
        default=300.0,
        help="extra seconds in all (1/3 control plane, 2/3 comparison) for waiting out other people's load",
    )
    parser.add_argument(
        "--profile", choices=("auto", "on", "off"), default="auto", help="py-spy run of the platform (auto: if found)"
    )
    parser.add_argument("--skip-control-plane", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-batching", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    report = run(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = args.out_dir / "latest.md", args.out_dir / "latest.json"
    notes = extract_notes(md_path.read_text()) if md_path.is_file() else None
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    md_path.write_text(render_markdown(report, notes))
    print(f"\nwrote {md_path} and {json_path} in {report['duration_seconds']:.0f}s")
    for verdict in evaluate_targets(report):
        print(f"{verdict.status:>7}  {verdict.name}: {_n(verdict.value, 3)} {verdict.unit} (target {verdict.target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
