"""The chaos soak's driver (``python -m benchmark.soak --chaos``): load on a real loopback cluster while model and
worker processes are killed with SIGKILL.

A supervisor and ``--workers`` workers run as separate processes (:mod:`benchmark._cluster`), the bundled chat
model with one replica on each. ``--concurrency`` clients send streamed and plain chats for ``--minutes``; on the
seeded schedule of :func:`benchmark.chaos.kill_schedule` (every ``--kill-seconds``) the driver SIGKILLs a model
process (its worker restarts it) or a worker process (which the driver starts again after ``--restart-delay``
seconds with the same command line and home, as systemd would, and which relaunches its replicas). Meanwhile it
records every request's ending, polls the model's replicas, and samples every platform process's RSS. After the
load it waits for the last kill to heal, stops the cluster and looks for processes of it still alive.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark._cluster import LoopbackCluster, Node
from benchmark.chaos import (
    KillRecord,
    ModelSnapshot,
    PlannedKill,
    RequestRecord,
    StreamTrace,
    back_at,
    classify_stream,
    failure_pause,
    failures_by_kill,
    first_success_after,
    is_ours,
    kill_schedule,
    orphans,
    relapse_at,
    status_changes,
)
from benchmark.soak import ProcessSeries, leak_suspects, start_time, summarize_series

__all__ = ["chaos"]

CHAT_MODEL, CHAT_UID = "smollm2-instruct", "chaos-chat"
POLL_SECONDS = 0.5
_WORDS = ("river", "copper", "lantern", "orbit", "meadow", "cipher", "harbor", "quartz", "violet", "summit")
_NUMBERS = re.compile(r"\d+")


@dataclass
class _Run:
    """State shared by the load, the watcher, the sampler and the chaos task."""

    cluster: LoopbackCluster
    args: argparse.Namespace
    started: float = field(default_factory=time.monotonic)
    records: list[RequestRecord] = field(default_factory=list)
    kills: list[KillRecord] = field(default_factory=list)
    snapshots: list[ModelSnapshot] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    replica_names: dict[int, str] = field(default_factory=dict)
    series: dict[tuple[int, float], ProcessSeries] = field(default_factory=dict)
    #: every platform process seen: pid -> (start time, label), for the orphan check
    seen: dict[int, tuple[float, str]] = field(default_factory=dict)
    counter: int = 0
    watching: bool = True

    def now(self) -> float:
        return time.monotonic() - self.started


# -- the load --------------------------------------------------------------------------------------------------
def _messages(rng: random.Random, n: int) -> list[dict[str, str]]:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 8)))
    return [{"role": "user", "content": f"Request {n}: write one short sentence using the words {words}."}]


def _error_message(text: str) -> str:
    """The API's ``error.message`` when the body has one, else the body's start."""
    with contextlib.suppress(ValueError, LookupError, TypeError):
        return str(json.loads(text)["error"]["message"])[:300]
    return text[:300]


async def _chat(run: _Run, client: httpx.AsyncClient, body: dict[str, Any]) -> RequestRecord:
    start = run.now()
    try:
        response = await client.post(
            f"{run.cluster.endpoint}/v1/chat/completions", json=body, timeout=run.args.request_timeout
        )
    except httpx.TimeoutException as exc:
        return RequestRecord(
            "chat", start, run.now(), "timeout", 0, f"{type(exc).__name__}: no answer in {run.args.request_timeout:g}s"
        )
    except httpx.HTTPError as exc:
        return RequestRecord("chat", start, run.now(), type(exc).__name__, 0, str(exc)[:300])
    end = run.now()
    if response.status_code == 200 and (response.json().get("choices") or [{}])[0].get("message"):
        return RequestRecord("chat", start, end, "ok", 200)
    return RequestRecord(
        "chat",
        start,
        end,
        f"http_{response.status_code}",
        response.status_code,
        _error_message(response.text),
        retry_after=response.headers.get("retry-after"),
    )


async def _read_stream(
    run: _Run, client: httpx.AsyncClient, body: dict[str, Any], trace: StreamTrace, start: float
) -> float | None:
    """Feed the stream's lines into ``trace``; returns the seconds until its first text."""
    ttft = None
    async with client.stream(
        "POST", f"{run.cluster.endpoint}/v1/chat/completions", json={**body, "stream": True}
    ) as response:
        trace.status = response.status_code
        if response.status_code != 200:
            trace.body = (await response.aread()).decode(errors="replace")
            trace.retry_after = response.headers.get("retry-after")
            return None
        async for line in response.aiter_lines():
            trace.feed(line)
            if ttft is None and trace.text_chars:
                ttft = run.now() - start
    return ttft


async def _stream(run: _Run, client: httpx.AsyncClient, body: dict[str, Any]) -> RequestRecord:
    start = run.now()
    trace, ttft = StreamTrace(), None
    try:
        ttft = await asyncio.wait_for(_read_stream(run, client, body, trace, start), run.args.stream_timeout)
    except asyncio.TimeoutError:
        trace.timed_out = True
    except httpx.HTTPError as exc:
        trace.transport_error = f"{type(exc).__name__}: {exc}"[:300]
    ending = classify_stream(trace)
    message = {
        "refused": _error_message(trace.body),
        "error_frame": trace.error or "",
        "cut": trace.transport_error or f"closed after {trace.chunks} chunk(s) without [DONE]",
        "truncated_done": f"[DONE] after {trace.chunks} chunk(s), {trace.text_chars} chars, no finish_reason",
        "hang": f"no end within {run.args.stream_timeout:g}s after {trace.chunks} chunk(s)",
    }.get(ending, "")
    if trace.data_after_done:
        message += " (data after [DONE])"
    return RequestRecord("chat_stream", start, run.now(), ending, trace.status, message[:300], ttft, trace.retry_after)


async def _client_loop(run: _Run, client: httpx.AsyncClient, seed: int, deadline: float) -> None:
    """One client: a streamed or plain chat after another until the deadline, pausing after a failure."""
    rng = random.Random(run.args.seed * 1000 + seed)
    while time.monotonic() < deadline:
        run.counter += 1
        body = {"model": CHAT_UID, "messages": _messages(rng, run.counter), "max_tokens": run.args.max_tokens}
        send = _stream if rng.random() < run.args.stream_share else _chat
        record = await send(run, client, body)
        run.records.append(record)
        if not record.ok:
            await asyncio.sleep(failure_pause(record.retry_after))


# -- watching the model and the processes ----------------------------------------------------------------------
async def _watch(run: _Run, client: httpx.AsyncClient) -> None:
    """Poll the model's replicas every half second: the snapshots recovery is measured on, and the pids of every
    replica the API ever listed (the first place the orphan check looks)."""
    while run.watching:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get(f"{run.cluster.endpoint}/v1/models/{CHAT_UID}", timeout=5)
            if response.status_code == 200:
                info = response.json()
                run.replicas = list(info.get("replicas") or [])
                pids = tuple(r["pid"] for r in run.replicas if isinstance(r.get("pid"), int))
                run.snapshots.append(ModelSnapshot(run.now(), str(info.get("status")), pids))
                for replica in run.replicas:
                    _remember_replica(run, replica)
        await asyncio.sleep(POLL_SECONDS)


def _remember_replica(run: _Run, replica: dict[str, Any]) -> None:
    pid = replica.get("pid")
    if not isinstance(pid, int) or pid in run.replica_names:
        return
    run.replica_names[pid] = str(replica.get("replica_uid"))
    with contextlib.suppress(psutil.Error):
        run.seen.setdefault(pid, (start_time(psutil.Process(pid)), f"model {run.replica_names[pid]} [{pid}]"))


def _label(run: _Run, node: Node, proc: psutil.Process) -> str:
    if proc.pid == node.pid:
        return "supervisor (API)" if node is run.cluster.supervisor else f"{node.name} #{node.incarnations}"
    if proc.pid in run.replica_names:
        return f"model {run.replica_names[proc.pid]} [{proc.pid}]"
    with contextlib.suppress(psutil.Error):
        return f"{node.name} child {proc.name()} [{proc.pid}]"
    return f"{node.name} child [{proc.pid}]"


def _sample_once(run: _Run) -> None:
    """One RSS/fd sample of every process of every node's tree (blocking: run in a thread)."""
    now = run.now()
    alive: set[tuple[int, float]] = set()
    for node in run.cluster.nodes:
        for proc in node.tree():
            try:
                with proc.oneshot():
                    key = (proc.pid, start_time(proc))
                    rss = proc.memory_info().rss / 2**20
                    fds = proc.num_fds()
            except psutil.Error:
                continue
            alive.add(key)
            label = _label(run, node, proc)
            if key not in run.series:
                run.series[key] = ProcessSeries(proc.pid, label, key[1])
            elif "child" in run.series[key].label and "child" not in label:
                run.series[key].label = label
            run.series[key].samples.append((now, rss, fds))
            run.seen.setdefault(proc.pid, (key[1], label))
    for key, series in run.series.items():
        if key not in alive and series.exited_at is None:
            series.exited_at = now


async def _sampler(run: _Run, deadline: float) -> None:
    while time.monotonic() < deadline:
        await asyncio.to_thread(_sample_once, run)
        await asyncio.sleep(run.args.sample_seconds)


# -- the kills -------------------------------------------------------------------------------------------------
async def _chaos(run: _Run, plan: list[PlannedKill]) -> None:
    followups = []
    for planned in plan:
        await asyncio.sleep(max(0.0, planned.at - run.now()))
        record = KillRecord(round(run.now(), 3), planned.kind, planned.index, planned.target)
        run.kills.append(record)
        if planned.kind == "worker":
            followups.append(asyncio.create_task(_kill_worker(run, record)))
        else:
            _kill_model(run, record)
    await asyncio.gather(*followups)


def _kill_model(run: _Run, record: KillRecord) -> None:
    """SIGKILL the replica's process on worker ``record.index``: the pid the API lists there, and only when it is
    that worker's child (never another process that happens to hold a stale pid)."""
    node, address = run.cluster.workers[record.index], run.cluster.worker_address(record.index)
    listed = [r for r in run.replicas if r.get("worker_address") == address and isinstance(r.get("pid"), int)]
    children = {p.pid for p in node.tree()[1:]}
    target = next((r for r in listed if r["pid"] in children), None)
    if target is None:
        record.skipped = (
            f"no replica of {node.name} listed"
            if not listed
            else f"the listed pid(s) {[r['pid'] for r in listed]} are not children of {node.name}"
        )
        return
    record.label = f"model {target.get('replica_uid')} on {node.name}"
    record.pids = [target["pid"]]
    with contextlib.suppress(ProcessLookupError):
        os.kill(target["pid"], signal.SIGKILL)


async def _kill_worker(run: _Run, record: KillRecord) -> None:
    """SIGKILL worker ``record.index``, start it again after the restart delay, and note which of its model
    processes were still alive ``--orphan-grace`` seconds after the kill (they must exit on their own)."""
    node = run.cluster.workers[record.index]
    if not node.alive():
        record.skipped = f"{node.name} was not running"
        return
    tree = node.tree()
    record.label = f"{node.name} (pid {node.pid})"
    record.pids = [p.pid for p in tree]
    run.cluster.kill(node)
    await asyncio.sleep(run.args.restart_delay)
    await asyncio.to_thread(run.cluster.restart_worker, node)
    record.restarted_at = round(run.now(), 3)
    grace = max(0.0, record.at + run.args.orphan_grace - run.now())
    _gone, alive = await asyncio.to_thread(psutil.wait_procs, tree[1:], grace)
    record.children_left = [p.pid for p in alive]


def _settle_kills(run: _Run) -> None:
    """Fill in each kill's failover time, recovery time, relapse and failures once the snapshots are in."""
    done = [k for k in run.kills if not k.skipped]
    ends = [k.at for k in done[1:]] + [float("inf")]
    for kill, until in zip(done, ends, strict=True):
        kill.first_success_s = first_success_after(kill.at, run.records)
        kill.back_s = back_at(kill.at, kill.pids, run.snapshots, run.args.workers)
        kill.relapse_s = relapse_at(kill.at, kill.back_s, until, run.snapshots, run.args.workers)
    for kill, failed in zip(done, failures_by_kill([k.at for k in done], run.records), strict=True):
        kill.failures = len(failed)
        kill.failures_until_s = round(max(r.end for r in failed) - kill.at, 3) if failed else None


async def _wait_for_recovery(run: _Run) -> None:
    """After the load: wait (at most ``--recovery-wait`` s) until every kill healed, then watch ``--settle-seconds``
    more, long enough for a worker's heartbeat timeout to pass, so a relapse after the last kill is seen too."""
    deadline = time.monotonic() + run.args.recovery_wait
    while time.monotonic() < deadline:
        _settle_kills(run)
        if all(k.skipped or k.back_s is not None for k in run.kills):
            break
        await asyncio.sleep(POLL_SECONDS)
    await asyncio.sleep(run.args.settle_seconds)


async def _drive(run: _Run, plan: list[PlannedKill]) -> None:
    deadline = time.monotonic() + run.args.minutes * 60
    limits = httpx.Limits(max_connections=run.args.concurrency + 4)
    async with (
        httpx.AsyncClient(trust_env=False, limits=limits, timeout=run.args.request_timeout) as client,
        httpx.AsyncClient(trust_env=False) as control,
    ):
        watcher = asyncio.create_task(_watch(run, control))
        chaos_task = asyncio.create_task(_chaos(run, plan))
        await asyncio.gather(
            _sampler(run, deadline),
            *(_client_loop(run, client, seed, deadline) for seed in range(run.args.concurrency)),
        )
        await chaos_task
        await asyncio.to_thread(_sample_once, run)
        await _wait_for_recovery(run)
        run.watching = False
        await watcher


# -- after the run ---------------------------------------------------------------------------------------------
def _scan_ours(root: Path) -> tuple[dict[int, float], list[tuple[int, str]]]:
    """Every process on the machine: pid -> start time, and those that :func:`benchmark.chaos.is_ours` marks."""
    alive: dict[int, float] = {}
    marked: list[tuple[int, str]] = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        try:
            alive[proc.pid] = start_time(proc)
            if proc.pid == os.getpid():
                continue
            try:
                environ = proc.environ()
            except psutil.AccessDenied:
                environ = None
            if is_ours(environ, proc.info["cmdline"] or [], str(root)):
                marked.append((proc.pid, f"{proc.info['name']} [{proc.pid}] (XINFERENCE_HOME or path marker)"))
        except psutil.Error:
            continue
    return alive, marked


def _find_orphans(run: _Run, root: Path) -> list[dict[str, Any]]:
    """After the shutdown: wait up to the orphan grace for what was seen to exit, then list what is left."""
    procs = []
    for pid, (started, _label) in run.seen.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if start_time(proc) == started:
                procs.append(proc)
    psutil.wait_procs(procs, timeout=run.args.orphan_grace)
    alive, marked = _scan_ours(root)
    return orphans(run.seen, alive, marked)


def _logged_at(date: str, clock: str) -> float | None:
    """Epoch seconds of a log line's ``asctime`` (local time, ``2026-01-01 08:00:00,123``)."""
    try:
        return time.mktime(time.strptime(f"{date} {clock.split(',')[0]}", "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def _log_lines(root: Path, shutdown_at: float, limit: int = 15) -> list[dict[str, Any]]:
    """The platform's WARNING and ERROR log lines (supervisor and workers), grouped with their digits masked,
    most frequent first, each with one example as written; those logged once the shutdown began (epoch
    ``shutdown_at``) are grouped apart, since a worker leaving then is expected."""
    groups: Counter[tuple[str, str]] = Counter()
    example: dict[tuple[str, str], str] = {}
    for log in sorted(root.glob("*/logs/*.log*")):
        with contextlib.suppress(OSError):
            for line in log.read_text(errors="replace").splitlines():
                parts = line.split(" ", 3)
                if len(parts) < 4 or parts[2] not in ("WARNING", "ERROR"):
                    continue
                logged = _logged_at(parts[0], parts[1])
                when = "shutdown" if logged is not None and logged >= int(shutdown_at) else "run"
                text = f"{log.parent.parent.name}: {parts[2]} {parts[3]}"
                key = (when, _NUMBERS.sub("N", text)[:200])
                groups[key] += 1
                example.setdefault(key, text[:400])
    return [{"count": count, "when": key[0], "line": example[key]} for key, count in groups.most_common(limit)]


def _copy_logs(root: Path, dest: Path) -> None:
    """Keep every node's logs (platform and model processes) and console output: the home is deleted after the
    run, and a failure is explained by them."""
    for node_home in sorted(p for p in root.iterdir() if p.is_dir()):
        target = dest / node_home.name
        if (node_home / "logs").is_dir():
            shutil.copytree(node_home / "logs", target / "logs", dirs_exist_ok=True)
        if (node_home / "process.out").is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(node_home / "process.out", target / "process.out")


def _events(endpoint: str) -> list[dict[str, Any]]:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        response = httpx.get(f"{endpoint}/v1/models/{CHAT_UID}/events", timeout=10, trust_env=False)
        if response.status_code == 200:
            return list(response.json().get("events") or [])
    return []


def _launch(cluster: LoopbackCluster, args: argparse.Namespace) -> None:
    """Two replicas (one per worker) of the bundled chat model; admission queues the whole load (a 429 would
    be the harness's doing, not a failure of the platform)."""
    body: dict[str, Any] = {
        "model_name": CHAT_MODEL,
        "model_engine": "llama.cpp",
        "model_uid": CHAT_UID,
        "replica": args.workers,
        "max_queued": args.concurrency * 2,
        "queue_timeout": args.minutes * 60 + 600,
    }
    if args.n_threads:
        body.update(n_threads=args.n_threads, n_threads_batch=args.n_threads)
    if args.cache_ram_mib is not None:
        body["cache_ram_mib"] = args.cache_ram_mib
    response = httpx.post(f"{cluster.endpoint}/v1/models", json=body, timeout=300, trust_env=False)
    if response.status_code != 200:
        raise RuntimeError(f"launching {CHAT_MODEL} failed: {response.status_code} {response.text[:300]}")
    info = httpx.get(f"{cluster.endpoint}/v1/models/{CHAT_UID}", timeout=10, trust_env=False).json()
    workers = {r["worker_address"] for r in info["replicas"]}
    if len(workers) != args.workers:
        raise RuntimeError(f"the replicas were not spread over the workers: {info['replicas']}")


def chaos(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chaos soak and return its report (rendered by :func:`benchmark.chaos_report.render_markdown`)."""
    plan = kill_schedule(args.seed, args.minutes * 60, args.kill_seconds, args.workers, args.worker_share)
    with tempfile.TemporaryDirectory(prefix="xinf-chaos-") as home:
        root = Path(home)
        cluster = LoopbackCluster(root, args.workers)
        run = _Run(cluster, args)
        try:
            cluster.start()
            _launch(cluster, args)
            run.started = time.monotonic()
            asyncio.run(_drive(run, plan))
            events = _events(cluster.endpoint)
        finally:
            shutdown_at = time.time()
            late = cluster.stop()
        found = _find_orphans(run, root)
        reaped = LoopbackCluster.reap([o["pid"] for o in found], {o["pid"]: o["start"] for o in found})
        log_lines = _log_lines(root, shutdown_at)
        if args.keep_logs is not None:
            _copy_logs(root, args.keep_logs)
    _settle_kills(run)
    processes = [summarize_series(s) for s in run.series.values()]
    return {
        "minutes": args.minutes,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "kill_seconds": args.kill_seconds,
        "seed": args.seed,
        "workers": args.workers,
        "worker_share": args.worker_share,
        "stream_share": args.stream_share,
        "stream_timeout": args.stream_timeout,
        "request_timeout": args.request_timeout,
        "machine": f"{psutil.cpu_count()} CPU cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM",
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() - run.now())),
        "requests": [asdict(r) for r in run.records],
        "kills": [asdict(k) for k in run.kills],
        "timeline": [asdict(s) for s in status_changes(run.snapshots)],
        "processes": processes,
        "leak_suspects": leak_suspects(processes, args.minutes),
        "orphans": found,
        "orphans_reaped": reaped,
        "late_at_shutdown": late,
        "events": Counter(str(e.get("event")) for e in events),
        "log_lines": log_lines,
    }
