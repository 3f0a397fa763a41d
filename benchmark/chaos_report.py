"""The chaos soak's verdict and its Markdown page (``results/chaos.md``), from the report
:func:`benchmark.chaos_run.chaos` returns: pure functions of that dict, so they are unit-tested on made-up runs.

Each criterion passes, fails, or is not judged (``None``: e.g. RSS trends over a run too short to call).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmark._md import n, table
from benchmark.chaos import BROKEN_BAD, STREAM_ENDINGS
from benchmark.soak import LEAK_MIB_PER_MIN
from benchmark.stats import percentile

__all__ = ["criteria", "failure_groups", "latency", "render_markdown", "verdict"]

#: Shortest run whose RSS slopes are judged (as in the plain soak).
MIN_LEAK_MINUTES = 5.0


def _requests(report: dict[str, Any], op: str) -> list[dict[str, Any]]:
    return [r for r in report.get("requests", []) if r["op"] == op]


def _ok(record: dict[str, Any]) -> bool:
    return record["outcome"] in ("ok", "complete")


def stream_endings(report: dict[str, Any]) -> Counter[str]:
    """Streams by ending (:data:`benchmark.chaos.STREAM_ENDINGS`)."""
    return Counter(r["outcome"] for r in _requests(report, "chat_stream"))


def failure_groups(
    report: dict[str, Any], op: str, outcomes: Sequence[str] | None = None, limit: int = 8
) -> list[tuple[int, str, int, str]]:
    """Failed requests of ``op`` grouped by (outcome, status, message), most frequent first:
    ``(count, outcome, status, message)``; only ``outcomes`` when given."""
    groups: Counter[tuple[str, int, str]] = Counter()
    for r in _requests(report, op):
        if not _ok(r) and (outcomes is None or r["outcome"] in outcomes):
            groups[(r["outcome"], r["status"], r["message"])] += 1
    return [(count, *key) for key, count in groups.most_common(limit)]


def latency(report: dict[str, Any], op: str) -> dict[str, float | None]:
    """p50/p90/p99/max of successful requests' end-to-end seconds (and time to first text for streams)."""
    done = [r for r in _requests(report, op) if _ok(r)]
    e2e = [r["end"] - r["start"] for r in done]
    ttft = [r["ttft"] for r in done if r.get("ttft") is not None]
    out: dict[str, float | None] = {}
    for name, values in (("e2e", e2e), ("ttft", ttft)):
        for p in (50, 90, 99):
            out[f"{name}_p{p}"] = round(percentile(values, p), 3) if values else None
        out[f"{name}_max"] = round(max(values), 3) if values else None
    return out


def criteria(report: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """``(criterion, passed, detail)`` for each thing the chaos soak checks."""
    chats = _requests(report, "chat")
    chat_failed = [r for r in chats if not _ok(r)]
    endings = stream_endings(report)
    broken_bad = sum(endings[e] for e in BROKEN_BAD)
    kills = [k for k in report.get("kills", []) if not k.get("skipped")]
    lingering = [(k["label"], k["children_left"]) for k in kills if k.get("children_left")]
    unhealed = [k["label"] for k in kills if k.get("back_s") is None]
    relapsed = [k["label"] for k in kills if k.get("relapse_s") is not None]
    suspects = report.get("leak_suspects", [])
    found = report.get("orphans", [])
    leak: tuple[str, bool | None, str]
    if report["minutes"] < MIN_LEAK_MINUTES:
        leak = (
            "RSS flat (no leak suspect)",
            None,
            f"not judged: the run lasted {report['minutes']:g} min, under {MIN_LEAK_MINUTES:g}",
        )
    else:
        leak = ("RSS flat (no leak suspect)", not suspects, ", ".join(suspects) or "none")
    return [
        (
            "Every non-streamed request succeeds",
            not chat_failed and bool(chats),
            f"{len(chat_failed)} of {len(chats)} failed",
        ),
        (
            "Streams that fail before their first byte are retried",
            endings["refused"] == 0,
            f"{endings['refused']} of {sum(endings.values())} refused",
        ),
        (
            "Every broken stream ends with an error frame (no plain [DONE], no cut, no hang)",
            broken_bad == 0,
            ", ".join(f"{e} {endings[e]}" for e in STREAM_ENDINGS if e != "refused"),
        ),
        (
            "No orphaned process (a dead worker's models exit; nothing outlives the shutdown)",
            not found and not lingering,
            f"{len(found)} after shutdown; {len(lingering)} worker kill(s) left model processes alive",
        ),
        leak,
        (
            "Every kill heals (the model whole again) and stays healed until the next",
            not unhealed and not relapsed,
            f"{len(kills) - len(unhealed)} of {len(kills)} healed"
            + (f"; not: {', '.join(unhealed)}" if unhealed else "")
            + (f"; relapsed after healing: {', '.join(relapsed)}" if relapsed else ""),
        ),
    ]


def verdict(report: dict[str, Any]) -> list[str]:
    """The criteria that failed (empty: the run passed)."""
    return [f"{name}: {detail}" for name, passed, detail in criteria(report) if passed is False]


def _code(text: str) -> str:
    """``text`` as inline code inside a table cell: one line, pipes escaped, backticks dropped."""
    flat = " ".join(text.split()).replace("`", "'").replace("|", "\\|")
    return f"`{flat}`" if flat else ""


def _mark(passed: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "not judged"}[passed]


def render_markdown(report: dict[str, Any]) -> str:
    """The report as the Markdown page ``results/chaos.md``."""
    failed = verdict(report)
    lines = [
        "# Chaos soak",
        "",
        f"`python -m benchmark.soak --chaos --minutes {report['minutes']:g} --concurrency {report['concurrency']} "
        f"--kill-seconds {report['kill_seconds']:g} --seed {report['seed']}` on {report['machine']}; "
        f"{report['started']}. A supervisor and {report['workers']} workers as separate processes, one replica of "
        f"`smollm2-instruct` (llama.cpp) on each; {report['stream_share']:.0%} of requests streamed, "
        f"max_tokens {report['max_tokens']}; client timeouts {report['stream_timeout']:g} s per stream, "
        f"{report['request_timeout']:g} s per plain request.",
        "",
        f"**Result: {'FAIL' if failed else 'PASS'}**",
        "",
        *table(
            ["criterion", "result", "detail"],
            [[name, _mark(passed), detail] for name, passed, detail in criteria(report)],
        ),
        "",
        "## Requests",
        "",
    ]
    rows = []
    for op in ("chat", "chat_stream"):
        done = _requests(report, op)
        stats = latency(report, op)
        rows.append(
            [
                op,
                str(len(done)),
                str(sum(1 for r in done if _ok(r))),
                *(n(stats[f"e2e_p{p}"]) for p in (50, 90, 99)),
                n(stats["e2e_max"]),
                n(stats["ttft_p50"]),
                n(stats["ttft_p99"]),
            ]
        )
    lines += table(["op", "sent", "succeeded", "e2e p50 s", "p90", "p99", "max", "TTFT p50 s", "TTFT p99"], rows)
    endings = stream_endings(report)
    lines += ["", "Streams by ending: " + ", ".join(f"{e} {endings[e]}" for e in STREAM_ENDINGS) + ".", ""]
    for op, title in (("chat", "Failed non-streamed requests"), ("chat_stream", "Failed streams")):
        groups = failure_groups(report, op)
        if groups:
            lines += [f"{title} (grouped, most frequent first):", ""]
            lines += table(
                ["count", "ending", "status", "message"], [[str(c), o, str(s), _code(m)] for c, o, s, m in groups]
            )
            lines.append("")
    lines += [
        "## Kills",
        "",
        "Seconds after each kill: *failover*, until the first success of a request sent after it (under "
        "this load it includes queueing: compare the e2e percentiles); *failures*, the failed requests that "
        "ended after it and before the next kill, and when the last of them ended; *back*, until the model "
        "was `ready` with every replica listed and none of the killed processes among them; *relapse*, when "
        "it stopped being whole again after that, before the next kill.",
        "",
    ]
    kill_rows = []
    for k in report.get("kills", []):
        if k.get("skipped"):
            kill_rows.append([n(k["at"], 1), k["label"], "skipped: " + k["skipped"], "-", "-", "-", "-"])
            continue
        left = f", model pids alive after the grace: {k['children_left']}" if k.get("children_left") else ""
        failures = str(k.get("failures", 0))
        if k.get("failures_until_s") is not None:
            failures += f" (last at {n(k['failures_until_s'], 1)})"
        kill_rows.append(
            [
                n(k["at"], 1),
                k["label"],
                f"pids {k['pids']}{left}",
                n(k.get("first_success_s")),
                failures,
                n(k.get("back_s"), 1),
                n(k.get("relapse_s"), 1),
            ]
        )
    lines += table(["at s", "killed", "processes", "failover s", "failures", "back s", "relapse s"], kill_rows)
    timeline = report.get("timeline") or []
    if timeline:
        lines += [
            "",
            "The model as `GET /v1/models/{uid}` showed it, at each change (seconds since the load "
            "began): " + "; ".join(f"{n(s['t'], 1)} {s['status']} {list(s['pids'])}" for s in timeline) + ".",
        ]
    events = report.get("events") or {}
    lines += ["", "Model events: " + (", ".join(f"{k} {v}" for k, v in sorted(events.items())) or "none") + ".", ""]
    lines += [
        "## Processes",
        "",
        "RSS of every platform process (supervisor, each worker incarnation, each model process), slopes as "
        "in the plain soak: least squares over all samples, after the first fifth, over the second half. A "
        f"leak suspect keeps rising by more than {LEAK_MIB_PER_MIN:g} MiB/min after warm-up and over the "
        f"second half of a run of at least {MIN_LEAK_MINUTES:g} minutes, alive at the end.",
        "",
    ]
    proc_rows = [
        [
            p["label"] + (" (exited)" if p["exited"] else ""),
            str(p["samples"]),
            str(p["minutes_sampled"]),
            f"{p['rss_first_mib']} → {p['rss_last_mib']} ({p['rss_max_mib']})",
            str(p["slope_mib_per_min"]),
            str(p["slope_after_warmup_mib_per_min"]),
            str(p.get("slope_second_half_mib_per_min", "-")),
        ]
        for p in report.get("processes", [])
    ]
    lines += table(
        [
            "process",
            "samples",
            "minutes",
            "RSS first → last (max) MiB",
            "slope MiB/min",
            "after warm-up",
            "second half",
        ],
        proc_rows,
    )
    found = report.get("orphans", [])
    lines += [
        "",
        f"Processes alive after the shutdown (orphans): {len(found)}"
        + (": " + ", ".join(f"{o['label']} (pid {o['pid']})" for o in found) if found else "")
        + ".",
    ]
    if report.get("late_at_shutdown"):
        late = ", ".join(report["late_at_shutdown"])
        lines.append(f"Nodes that did not stop within the grace after SIGTERM: {late}.")
    lines.append("")
    if report.get("log_lines"):
        lines += [
            "## Platform warnings and errors",
            "",
            "From the supervisor's and the workers' logs, grouped with digits masked; one example each; "
            "*when*: during the run, or once the final shutdown began.",
            "",
        ]
        lines += table(
            ["count", "when", "line"],
            [[str(g["count"]), g.get("when", "run"), _code(g["line"])] for g in report["log_lines"]],
        )
        lines.append("")
    if report.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in report["notes"]] + [""]
    return "\n".join(lines)
