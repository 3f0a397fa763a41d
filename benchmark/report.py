"""``results/latest.md`` from a :func:`benchmark.run_all.run` report: machine, targets, every section, gaps.

Pure (no servers, no clock): the report dict in, markdown out, so it is unit-tested and can re-render an old
``latest.json``. The sections of the other engines, the per-engine launch figures and the optional scale and
defaults studies are in :mod:`benchmark.report_engines`. The hand-written notes between :data:`NOTES_START` and
:data:`NOTES_END` are carried over from the previous file by the caller (:func:`extract_notes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmark._md import n as _n
from benchmark._md import pair
from benchmark._md import table as _table
from benchmark.bench_control_plane import median_or_none
from benchmark.report_engines import batching_section, engines_sections
from benchmark.report_media import audio_section, images_section, original_section
from benchmark.targets import Verdict, evaluate_targets

__all__ = ["DEFAULT_NOTES", "NOTES_END", "NOTES_START", "extract_notes", "noise_warning", "render_markdown"]

NOTES_START = "<!-- notes -->"
NOTES_END = "<!-- /notes -->"
DEFAULT_NOTES = "_No profile findings recorded yet._"


def extract_notes(markdown: str) -> str | None:
    """The hand-written text between the notes markers of an earlier ``latest.md``, ``None`` when absent."""
    start = markdown.find(NOTES_START)
    end = markdown.find(NOTES_END, start + len(NOTES_START))
    if start < 0 or end < 0:
        return None
    return markdown[start + len(NOTES_START) : end].strip("\n")


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
    rows = [[v.name, v.measured, v.target, f"**{v.status}**", v.detail] for v in verdicts]
    return [
        "## Targets (DESIGN §6)",
        "",
        "A figure measured over rounds shows its estimate and 95% interval over the rounds (ratios: geometric mean, "
        "t-interval on the logs; differences: mean, t-interval) and is judged on the whole interval: "
        "*inconclusive* when the target lies inside it.",
        "",
        *_table(["figure", "measured (95% interval)", "target", "", "note"], rows),
        "",
    ]


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
                pair(raw.get("itl_ms_p50"), ours.get("itl_ms_p50")),
                pair(raw.get("itl_ms_p99"), ours.get("itl_ms_p99")),
                pair(raw.get("gap_ms_p50"), ours.get("gap_ms_p50")),
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
            "ITL p50 ms raw / ours",
            "ITL p99 ms raw / ours",
            "delivery gap p50 ms raw / ours",
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
                _n(extra.get("idle_background"), 3),
                f"{_n(deliveries.get('raw'))} / {_n(deliveries.get('ours'))}",
            ]
        )
    lines += [
        "",
        "Server CPU per output token (ms; psutil). The platform's own share is the API process plus the model "
        "actor's event loop (the model process's main thread); the model process as a whole also includes the "
        "engine's threads, which burn more when each token takes longer. Of which with no request: what the same "
        "processes burn idle (timers, heartbeats, watchers; read for a while after the warm-up) over the runs' wall "
        "time, which no relay can win back. Chunks per delivery: streamed chunks "
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
                "of which with no request",
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
            "  CPU the platform spent until ready",
            ", ".join(_n(v) for v in control.get("ready_cpu_seconds", [])) + " s",
            f"{_n(control.get('ready_cpu_seconds_median'))} s",
        ],
        [
            "  importing the start path (`import xinference.deploy.local`), CPU / peak RSS",
            f"{_n((control.get('imports') or {}).get('cpu_seconds'))} s / "
            f"{_n((control.get('imports') or {}).get('peak_rss_mb'), 0)} MiB",
            ", ".join(
                f"{m['module']} {m['cumulative_ms']:.0f} ms"
                for m in (control.get("imports") or {}).get("slowest", [])[:5]
            ),
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
        lines += batching_section(report["batching"])
    lines += engines_sections(report)
    lines += audio_section(report.get("audio"))
    lines += images_section(report.get("images"))
    lines += original_section(report.get("original"))
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


def noise_warning(report: dict[str, Any], limit: float) -> str | None:
    """A caution when other processes loaded the machine during measured runs despite the retries."""
    levels = list((report.get("compare") or {}).get("levels", []))
    for result in (report.get("engines") or {}).values():
        levels += result.get("levels", [])
    worst = max((level["max_foreign_share"] for level in levels), default=0.0)
    if worst > limit:
        return (
            f"Other processes used up to {worst:.0%} of the machine during some measured runs (limit {limit:.0%}, "
            "after retries): treat the engine-vs-platform figures as noisy."
        )
    return None
