"""Soak test: a long mixed load on one ``xinference-local``, watching for errors, memory growth and leftovers.

Starts ``xinference-local`` on a free port with a temporary ``XINFERENCE_HOME``, launches the bundled chat model
(``smollm2-instruct``, llama.cpp) and embedding model (``all-MiniLM-L6-v2``), then for ``--minutes`` keeps
``--concurrency`` clients busy with a mix of streamed and non-streamed chat (a fresh prompt every time, small
``max_tokens``) and embeddings. Every ``--churn-seconds`` it launches a second model instance (``--churn-model``,
default the bundled gemma-3-270m GGUF), sends it two chats, terminates it and checks its process is gone.

Recorded: requests done and errors by kind (there must be none); every platform process's RSS and open file
descriptors sampled every ``--sample-seconds`` with psutil (the server process holding the API, supervisor and
worker; each model subprocess), with a least-squares RSS slope in MiB/min over the whole run and after the first
fifth (warm-up); after shutdown, any process of the server's tree still alive. Writes ``results/soak.md`` and
``results/soak.json``; exits 1 when there was an error or a leftover process.

    python -m benchmark.soak --minutes 10 --concurrency 16

``--chaos`` runs the chaos soak instead: the chat load on a real cluster (a supervisor and two workers as
processes) while model and worker processes are killed with SIGKILL (:mod:`benchmark.chaos_run`; results in
``results/chaos.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark._proc import Platform, http_client, launch_model, start_platform, terminate_model

__all__ = [
    "ProcessSeries",
    "leak_suspects",
    "least_squares_slope",
    "main",
    "render_markdown",
    "start_time",
    "summarize_series",
    "verdict",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CHAT_MODEL, CHAT_UID = "smollm2-instruct", "soak-chat"
EMBED_MODEL, EMBED_UID = "all-MiniLM-L6-v2", "soak-embed"
SERVER_LABEL = "server (API + supervisor + worker)"
#: A process whose RSS grows faster than this after warm-up, over a run of at least 5 minutes, is flagged.
LEAK_MIB_PER_MIN = 1.0
_WORDS = (
    "river",
    "copper",
    "lantern",
    "orbit",
    "meadow",
    "cipher",
    "harbor",
    "quartz",
    "violet",
    "summit",
    "ember",
    "glacier",
    "pixel",
    "thistle",
    "canyon",
    "mosaic",
    "falcon",
    "tundra",
    "velvet",
    "beacon",
)


# -- pure parts (unit-tested in tests/benchmark/test_soak.py) --------------------------------------------------
def least_squares_slope(points: Sequence[tuple[float, float]]) -> float:
    """Slope of the least-squares line through ``(x, y)`` points; 0.0 for fewer than two distinct x values."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


@dataclass
class ProcessSeries:
    """Samples of one platform process: ``(seconds since the run began, RSS MiB, open fds or None)``."""

    pid: int
    label: str
    create_time: float
    samples: list[tuple[float, float, int | None]] = field(default_factory=list)
    exited_at: float | None = None


def summarize_series(series: ProcessSeries, warmup_fraction: float = 0.2) -> dict[str, Any]:
    """RSS first/last/max, slope in MiB/min over all samples and after the warm-up fraction, fds first/last."""
    rss = [(t / 60.0, mib) for t, mib, _ in series.samples]
    fds = [n for _, _, n in series.samples if n is not None]
    span_min = (rss[-1][0] - rss[0][0]) if rss else 0.0
    settled = [p for p in rss if rss and p[0] >= rss[0][0] + span_min * warmup_fraction]
    second_half = [p for p in rss if rss and p[0] >= rss[0][0] + span_min / 2]
    return {
        "pid": series.pid,
        "label": series.label,
        "samples": len(rss),
        "minutes_sampled": round(span_min, 2),
        "rss_first_mib": round(rss[0][1], 1) if rss else None,
        "rss_last_mib": round(rss[-1][1], 1) if rss else None,
        "rss_max_mib": round(max(m for _, m in rss), 1) if rss else None,
        "slope_mib_per_min": round(least_squares_slope(rss), 3),
        "slope_after_warmup_mib_per_min": round(least_squares_slope(settled), 3),
        "slope_second_half_mib_per_min": round(least_squares_slope(second_half), 3),
        "fds_first": fds[0] if fds else None,
        "fds_last": fds[-1] if fds else None,
        "exited": series.exited_at is not None,
    }


def verdict(report: dict[str, Any]) -> list[str]:
    """Why the soak failed (empty when it passed): any error, any leftover process. Leak suspects are listed in
    the report but do not fail it: a slope over minutes on a shared machine is a lead, not a proof."""
    reasons = [f"{count} error(s) of kind {kind}" for kind, count in sorted(report.get("errors", {}).items())]
    reasons += [f"leftover process after shutdown: {p['label']} (pid {p['pid']})" for p in report.get("leftovers", [])]
    return reasons


def leak_suspects(processes: Iterable[dict[str, Any]], minutes: float) -> list[str]:
    """Labels of long-lived processes whose RSS kept growing faster than :data:`LEAK_MIB_PER_MIN`, both after the
    warm-up and over the run's second half. A leak grows at the same rate throughout; a bounded cache or an
    allocator filling its arenas (an embedding model meeting new input shapes: measured to level off after ~1,000
    requests) rises and then stays, so its second-half slope is ~0."""
    if minutes < 5:
        return []
    return [
        p["label"]
        for p in processes
        if not p["exited"]
        and p["minutes_sampled"] >= minutes * 0.8
        and p["slope_after_warmup_mib_per_min"] > LEAK_MIB_PER_MIN
        and p.get("slope_second_half_mib_per_min", p["slope_after_warmup_mib_per_min"]) > LEAK_MIB_PER_MIN
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """The report as the Markdown page ``results/soak.md``."""
    failed = verdict(report)
    lines = [
        "# Soak test",
        "",
        f"`python -m benchmark.soak --minutes {report['minutes']:g} --concurrency {report['concurrency']}` on "
        f"{report['machine']}; {report['started']}.",
        "",
        f"**Result: {'FAIL' if failed else 'PASS'}**"
        + (": " + "; ".join(failed) if failed else " (no error, no leftover process)."),
        "",
        "## Requests",
        "",
        "| kind | done | errors |",
        "|---|---:|---:|",
    ]
    errors_by_op: Counter[str] = Counter()
    for kind, count in report.get("errors", {}).items():
        errors_by_op[kind.split(":", 1)[0]] += count
    for op, done in sorted(report.get("done", {}).items()):
        lines.append(f"| {op} | {done} | {errors_by_op.get(op, 0)} |")
    lines += ["", f"Churn: {report.get('churn_cycles', 0)} launch/terminate cycles of `{report['churn_model']}`.", ""]
    if report.get("errors"):
        lines += ["Errors by kind:", ""] + [f"- `{k}`: {v}" for k, v in sorted(report["errors"].items())] + [""]
        lines += ["First error messages:", ""] + [f"- {m}" for m in report.get("error_samples", [])] + [""]
    lines += [
        "## Processes",
        "",
        "RSS slope is a least-squares fit over every sample, over the samples after the first fifth (warm-up), and "
        "over the second half.",
        "",
        "| process | samples | minutes | RSS first → last (max) MiB | slope MiB/min | after warm-up "
        "| second half | fds first → last |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for p in report.get("processes", []):
        label = p["label"] + (" (exited)" if p["exited"] else "")
        lines.append(
            f"| {label} | {p['samples']} | {p['minutes_sampled']} | {p['rss_first_mib']} → {p['rss_last_mib']} "
            f"({p['rss_max_mib']}) | {p['slope_mib_per_min']} | {p['slope_after_warmup_mib_per_min']} | "
            f"{p.get('slope_second_half_mib_per_min', '-')} | {p['fds_first']} → {p['fds_last']} |"
        )
    suspects = report.get("leak_suspects", [])
    lines += [
        "",
        "Leak suspects (RSS still rising after warm-up and over the second half by more than "
        f"{LEAK_MIB_PER_MIN:g} MiB/min): " + (", ".join(suspects) if suspects else "none") + ".",
        "",
        f"Leftover processes after shutdown: {len(report.get('leftovers', []))}.",
        "",
    ]
    if report.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    return "\n".join(lines)


# -- the run ---------------------------------------------------------------------------------------------------
def _prompt(rng: random.Random, n: int) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
    return f"Request {n}: write one short sentence using the words {words}."


def _pids_in(obj: Any) -> set[int]:
    """Every integer under a ``pid`` key anywhere in a JSON answer."""
    found: set[int] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "pid" and isinstance(value, int):
                found.add(value)
            else:
                found |= _pids_in(value)
    elif isinstance(obj, list):
        for item in obj:
            found |= _pids_in(item)
    return found


@dataclass
class _Run:
    """State shared by the load tasks, the sampler and the churn task."""

    platform: Platform
    args: argparse.Namespace
    started: float = field(default_factory=time.monotonic)
    done: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    series: dict[tuple[int, float], ProcessSeries] = field(default_factory=dict)
    model_pids: dict[int, str] = field(default_factory=dict)
    churn_cycles: int = 0
    counter: int = 0
    boot_times: set[float] = field(default_factory=set)

    def error(self, op: str, kind: str, message: str) -> None:
        self.errors[f"{op}:{kind}"] += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(f"{op} {kind}: {message[:300]}")

    def elapsed(self) -> float:
        return time.monotonic() - self.started


async def _one_request(run: _Run, client: httpx.AsyncClient, rng: random.Random) -> None:
    run.counter += 1
    n, roll = run.counter, rng.random()
    api, max_tokens = run.platform.api, run.args.max_tokens
    messages = [{"role": "user", "content": _prompt(rng, n)}]
    if roll < 0.4:
        op = "chat_stream"
        body = {"model": CHAT_UID, "messages": messages, "max_tokens": max_tokens, "stream": True}
        async with client.stream("POST", f"{api}/chat/completions", json=body) as response:
            if response.status_code != 200:
                run.error(op, f"http_{response.status_code}", (await response.aread()).decode(errors="replace"))
                return
            saw_done = False
            async for line in response.aiter_lines():
                if line.startswith("data: ") and '"error"' in line[:20]:
                    run.error(op, "error_frame", line)
                    return
                saw_done = saw_done or line.strip() == "data: [DONE]"
            if not saw_done:
                run.error(op, "no_done", "the stream ended without data: [DONE]")
                return
    elif roll < 0.7:
        op = "chat"
        body = {"model": CHAT_UID, "messages": messages, "max_tokens": max_tokens}
        response = await client.post(f"{api}/chat/completions", json=body)
        if response.status_code != 200 or not response.json().get("choices"):
            run.error(op, f"http_{response.status_code}", response.text)
            return
    else:
        op = "embeddings"
        inputs = [_prompt(rng, n) for _ in range(rng.randint(1, 4))]
        response = await client.post(f"{api}/embeddings", json={"model": EMBED_UID, "input": inputs})
        if response.status_code != 200 or len(response.json().get("data", [])) != len(inputs):
            run.error(op, f"http_{response.status_code}", response.text)
            return
    run.done[op] += 1


async def _load_worker(run: _Run, client: httpx.AsyncClient, seed: int, deadline: float) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        try:
            await _one_request(run, client, rng)
        except httpx.HTTPError as exc:
            run.error("request", type(exc).__name__, str(exc))


def _sample_once(run: _Run) -> None:
    """One RSS/fd sample of every process of the server's tree (blocking: run in a thread)."""
    now = run.elapsed()
    run.boot_times.add(psutil.boot_time())
    alive: set[tuple[int, float]] = set()
    for proc in run.platform.tree():
        try:
            with proc.oneshot():
                key = (proc.pid, start_time(proc))
                rss = proc.memory_info().rss / 2**20
                fds = proc.num_fds() if hasattr(proc, "num_fds") else None
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        alive.add(key)
        if key not in run.series:
            run.series[key] = ProcessSeries(proc.pid, _label(run, proc), key[1])
        elif run.series[key].label.startswith("child") and proc.pid in run.model_pids:
            run.series[key].label = _label(run, proc)
        run.series[key].samples.append((now, rss, fds))
    for key, series in run.series.items():
        if key not in alive and series.exited_at is None:
            series.exited_at = now


def start_time(proc: psutil.Process) -> float:
    """When ``proc`` started: on Linux its ``starttime`` in clock ticks since boot (``/proc/<pid>/stat``), which
    unlike psutil's wall-clock ``create_time()`` does not move when the kernel's ``btime`` moves; elsewhere
    ``create_time()``."""
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        return float(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return float(proc.create_time())


def _label(run: _Run, proc: psutil.Process) -> str:
    if proc.pid == run.platform.process.pid:
        return SERVER_LABEL
    if proc.pid in run.model_pids:
        return f"model {run.model_pids[proc.pid]} [{proc.pid}]"
    with contextlib.suppress(psutil.Error):
        return f"child {proc.name()} [{proc.pid}]"
    return f"child [{proc.pid}]"


async def _refresh_model_pids(run: _Run, client: httpx.AsyncClient, uids: Iterable[str]) -> set[int]:
    pids: set[int] = set()
    for uid in uids:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get(f"{run.platform.api}/models/{uid}")
            if response.status_code == 200:
                for pid in _pids_in(response.json()):
                    run.model_pids[pid] = uid
                    pids.add(pid)
    return pids


async def _sampler(run: _Run, client: httpx.AsyncClient, deadline: float) -> None:
    while time.monotonic() < deadline:
        await _refresh_model_pids(run, client, (CHAT_UID, EMBED_UID))
        await asyncio.to_thread(_sample_once, run)
        await asyncio.sleep(run.args.sample_seconds)


async def _churn(run: _Run, client: httpx.AsyncClient, deadline: float) -> None:
    """Launch, use, terminate and check the churn model every ``--churn-seconds`` until the deadline."""
    while time.monotonic() + run.args.churn_seconds < deadline:
        await asyncio.sleep(run.args.churn_seconds)
        uid = f"soak-churn-{run.churn_cycles}"
        try:
            await asyncio.to_thread(
                launch_model,
                run.platform.api,
                uid,
                {"n_ctx": 1024, **_threads(run.args)},
                model_name=run.args.churn_model,
            )
            pids = await _refresh_model_pids(run, client, (uid,))
            await asyncio.to_thread(_sample_once, run)
            for i in range(2):  # completions: a base model (gemma-3-270m) has no chat template
                body = {
                    "model": uid,
                    "prompt": f"Churn {uid}, turn {i}: once upon a time",
                    "max_tokens": run.args.max_tokens,
                }
                response = await client.post(f"{run.platform.api}/completions", json=body)
                if response.status_code != 200:
                    run.error("churn", f"completion_http_{response.status_code}", response.text)
            await asyncio.to_thread(terminate_model, run.platform.api, uid)
            _gone, alive = await asyncio.to_thread(psutil.wait_procs, _procs(pids), 15)
            for proc in alive:
                run.error("churn", "process_left_after_terminate", f"{uid} pid {proc.pid} still alive 15 s later")
        except (RuntimeError, httpx.HTTPError) as exc:
            run.error("churn", type(exc).__name__, str(exc))
        run.churn_cycles += 1
        run.done["churn"] += 1


def _threads(args: argparse.Namespace) -> dict[str, int]:
    """llama.cpp launch options of every chat model: threads, and the host-memory prompt cache's size."""
    options = {"n_threads": args.n_threads, "n_threads_batch": args.n_threads} if args.n_threads else {}
    if args.cache_ram_mib is not None:
        options["cache_ram_mib"] = args.cache_ram_mib
    return options


def _procs(pids: Iterable[int]) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    return procs


async def _drive(run: _Run) -> None:
    deadline = time.monotonic() + run.args.minutes * 60
    limits = httpx.Limits(max_connections=run.args.concurrency + 8)
    timeout = run.args.minutes * 60 + 600  # a queued request waits as long as admission lets it
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, limits=limits) as client:
        tasks = [_load_worker(run, client, seed, deadline) for seed in range(run.args.concurrency)]
        await asyncio.gather(_sampler(run, client, deadline), _churn(run, client, deadline), *tasks)
        await asyncio.to_thread(_sample_once, run)


def _leftovers(run: _Run) -> list[dict[str, Any]]:
    """Processes ever seen in the server's tree that are still alive (same pid and start time) after shutdown."""
    left = []
    for (pid, created), series in run.series.items():
        with contextlib.suppress(psutil.NoSuchProcess):
            if start_time(psutil.Process(pid)) == created:
                left.append({"pid": pid, "label": series.label})
    return left


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the whole soak and return the report (see :func:`render_markdown`)."""
    notes = [f"the machine has {psutil.cpu_count()} CPU cores shared with other work: timings and RSS are noisy"]
    if args.cache_ram_mib is not None:
        notes.append(
            f"llama.cpp's host-memory prompt cache was capped at {args.cache_ram_mib} MiB (--cache-ram-mib): "
            "a bounded cache that fills with fresh prompts (the platform's default is 1024 MiB, ~1 MiB a "
            "prompt here), sized so that it is full within the warm-up and growth after it means a leak"
        )
    if args.n_threads:
        notes.append(
            f"llama.cpp models ran with n_threads={args.n_threads} (--n-threads; 0 keeps the platform's "
            "default, all usable cores, which spins badly when the cores are oversubscribed)"
        )
    with tempfile.TemporaryDirectory(prefix="xinf-soak-") as home:
        platform = start_platform(Path(home), ready_timeout=120)
        run = _Run(platform, args)
        try:
            # Admission must not shed this load: every request is queued until served, so a 429 is a real error.
            admission = {"max_queued": args.concurrency * 2, "queue_timeout": args.minutes * 60 + 600}
            launch_model(platform.api, CHAT_UID, {**admission, **_threads(args)}, model_name=CHAT_MODEL)
            with http_client(300) as client:
                response = client.post(
                    f"{platform.api}/models",
                    json={"model_name": EMBED_MODEL, "model_type": "embedding", "model_uid": EMBED_UID, **admission},
                )
            if response.status_code != 200:
                raise RuntimeError(f"launching {EMBED_MODEL} failed: {response.status_code} {response.text[:300]}")
            run.started = time.monotonic()
            asyncio.run(_drive(run))
        finally:
            platform.stop()
        leftovers = _leftovers(run)
        log_tail = platform.log_tail(40) if run.errors else ""
    processes = [summarize_series(s) for s in run.series.values()]
    if len(run.boot_times) > 1:
        notes.append(
            f"the kernel's boot time (btime, psutil.boot_time()) moved during the run: "
            f"{sorted(run.boot_times)}; every wall-clock process create_time moved with it"
        )
    report: dict[str, Any] = {
        "minutes": args.minutes,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "churn_model": args.churn_model,
        "machine": f"{psutil.cpu_count()} CPU cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM",
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() - run.elapsed())),
        "done": dict(run.done),
        "errors": dict(run.errors),
        "error_samples": run.error_samples,
        "churn_cycles": run.churn_cycles,
        "processes": processes,
        "leak_suspects": leak_suspects(processes, args.minutes),
        "leftovers": leftovers,
        "notes": notes,
        "server_log_tail": log_tail,
    }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--churn-seconds", type=float, default=30.0)
    parser.add_argument("--churn-model", default="gemma-3-270m")
    parser.add_argument(
        "--cache-ram-mib",
        type=int,
        default=64,
        help="llama.cpp's prompt cache per chat model (MiB); small, so it is full within the warm-up",
    )
    parser.add_argument(
        "--n-threads",
        type=int,
        default=1,
        help="llama.cpp threads per model; 0 = the platform's default (all usable cores)",
    )
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    chaos = parser.add_argument_group(
        "chaos mode",
        "--chaos runs a cluster (supervisor + --workers workers, one chat replica on each) instead of "
        "xinference-local, and SIGKILLs a model or worker process every --kill-seconds (no embeddings, no churn); "
        "writes results/chaos.md and chaos.json (see benchmark/chaos_run.py)",
    )
    chaos.add_argument("--chaos", action="store_true")
    chaos.add_argument("--kill-seconds", type=float, default=60.0, help="seconds between two kills")
    chaos.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the kill schedule and of the clients' prompts and stream/plain choices",
    )
    chaos.add_argument("--workers", type=int, default=2, help="workers, and replicas of the chat model")
    chaos.add_argument(
        "--worker-share",
        type=float,
        default=0.5,
        help="probability that a kill takes a worker process rather than a model process",
    )
    chaos.add_argument("--stream-share", type=float, default=0.5, help="share of requests that are streamed")
    chaos.add_argument(
        "--stream-timeout", type=float, default=60.0, help="a stream not ended by then is counted as a hang"
    )
    chaos.add_argument("--request-timeout", type=float, default=120.0, help="client timeout of a plain request")
    chaos.add_argument(
        "--restart-delay",
        type=float,
        default=1.0,
        help="seconds before a killed worker is started again (systemd's RestartSec)",
    )
    chaos.add_argument(
        "--orphan-grace",
        type=float,
        default=10.0,
        help="seconds a dead worker's model processes, and the cluster after SIGTERM, get to exit",
    )
    chaos.add_argument(
        "--recovery-wait",
        type=float,
        default=120.0,
        help="after the load, seconds to wait for the last kill to heal before shutting down",
    )
    chaos.add_argument(
        "--settle-seconds",
        type=float,
        default=20.0,
        help="then watch this long, past a worker's heartbeat timeout, for a relapse",
    )
    chaos.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="copy every node's logs here after the run (the cluster's home is temporary)",
    )
    args = parser.parse_args(argv)
    if args.chaos:
        return _chaos_main(args)
    report = soak(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "soak.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out_dir / "soak.md").write_text(render_markdown(report))
    failed = verdict(report)
    print(render_markdown(report))
    return 1 if failed else 0


def _chaos_main(args: argparse.Namespace) -> int:
    """The chaos mode: imported here, since it needs a cluster's worth of modules the plain soak does not."""
    from benchmark.chaos_report import render_markdown as render_chaos
    from benchmark.chaos_report import verdict as chaos_verdict
    from benchmark.chaos_run import chaos

    report = chaos(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "chaos.json").write_text(json.dumps(report, indent=2) + "\n")
    text = render_chaos(report)
    (args.out_dir / "chaos.md").write_text(text)
    print(text)
    return 1 if chaos_verdict(report) else 0


if __name__ == "__main__":
    sys.exit(main())
