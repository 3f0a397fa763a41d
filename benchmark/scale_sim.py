"""The control plane at cluster scale, on paper: the real supervisor and route cache with stand-in workers.

Everything runs in this one process: the real :class:`SupervisorActor` in one xoscar pool, and ``--workers``
stand-in worker actors (:class:`StandInWorker`, test doubles: they start no process and load no model) each in a
pool of its own, so every call between them still crosses a socket and xoscar's serialization as between
machines. Measured:

* **launch placement**: the wall time of each ``launch_model`` (one replica each, real decision path: registry,
  engine choice, placement, memory check, launch history) as the cluster fills, in buckets of launches;
* **route refresh**: the API route cache's full rebuild (``RouteTable.refresh``: ``get_routes`` + table) and a
  ``GET /v1/models`` listing (the API's route, in-process: ``list_models`` + ``model_entry`` + JSON) with every
  model running;
* **heartbeat load**: this process's CPU seconds per second while every stand-in heartbeats at the real interval
  (``settings.heartbeat_interval()``; each beats from the moment it joins, as a real worker does, also during the
  launches), minus a short window with the beats paused; it includes the stand-ins' sending side, so it is an
  upper bound on the supervisor's share (the profile splits the two).

Each phase is profiled (cProfile); the top lines by own time are kept, so a slow spot comes with its cause::

    python -m benchmark.scale_sim --workers 100 --replicas 1000 --json-out benchmark/results/scale.json \\
        --md-out benchmark/results/scale.md
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/scale_sim.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xoscar as xo

__all__ = [
    "Scale",
    "StandInWorker",
    "bucket_medians",
    "first_degradation",
    "main",
    "profile_lines",
    "render_markdown",
    "run_scale",
]

#: a launch of the bundled model: every stand-in "has" llama.cpp, so the real engine choice accepts it
LAUNCH = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "replica": 1}
#: a launch slower than this many times the first bucket's median counts as degraded
DEGRADED_FACTOR = 2.0


class StandInWorker(xo.StatelessActor):  # type: ignore[misc]
    """Stand-in of a worker for the scale simulation: answers the supervisor's calls at once, starts nothing.

    ``launch_replica`` returns a made-up replica address (nothing listens there; the route cache makes refs
    without connecting); ``start_heartbeat`` beats like ``WorkerActor._heartbeat``: ``heartbeat(address,
    hardware)`` every ``interval`` seconds, with the same hardware report a real worker sends.
    """

    def __init__(self, hardware: dict[str, Any], index: int) -> None:
        super().__init__()
        self._hardware = hardware
        self._index = index
        self._replicas: dict[str, dict[str, Any]] = {}
        self._beat: asyncio.Task[None] | None = None
        self.beats = 0

    @classmethod
    def default_uid(cls) -> str:
        return "worker"  # the supervisor finds workers by the real WorkerActor's uid

    async def hardware(self) -> dict[str, Any]:
        return self._hardware

    async def launch_replica(self, plan: Any) -> dict[str, Any]:
        """``plan``: the supervisor's LaunchPlan."""
        port = 40_000 + len(self._replicas)
        self._replicas[plan.replica_uid] = plan
        return {
            "address": f"127.{self._index // 250}.{self._index % 250 + 1}.1:{port}",
            "pid": port,
            "engine_config": {"n_ctx": 8192, "n_parallel": 4, "kv_unified": True},
        }

    async def terminate_replica(self, replica_uid: str, why: str = "") -> None:
        self._replicas.pop(replica_uid, None)

    async def launch_progress(self, replica_uid: str) -> float:
        return 1.0

    async def cancel_launch(self, replica_uid: str) -> None:
        return None

    async def list_cache(self, model_name: str | None = None) -> list[dict[str, Any]]:
        return []

    async def start_heartbeat(self, supervisor_address: str, interval: float) -> None:
        from xinference.core.supervisor import SupervisorActor

        supervisor = await xo.actor_ref(address=supervisor_address, uid=SupervisorActor.default_uid())

        async def beat() -> None:
            while True:
                await asyncio.sleep(interval)
                await supervisor.heartbeat(self.address, self._hardware)
                self.beats += 1

        self._beat = asyncio.create_task(beat())

    async def beat_count(self) -> int:
        return self.beats

    async def stop_heartbeat(self) -> int:
        if self._beat is not None:
            self._beat.cancel()
            self._beat = None
        return self.beats


# -- pure parts ----------------------------------------------------------------------------------------------------
def bucket_medians(seconds: Sequence[float], size: int) -> list[dict[str, float]]:
    """Launch times in consecutive buckets of ``size``: ``{"upto", "median_ms", "max_ms"}`` per bucket (the last
    may be shorter)."""
    if size < 1:
        raise ValueError(f"bucket size must be >= 1, got {size}")
    buckets = []
    for start in range(0, len(seconds), size):
        part = seconds[start : start + size]
        buckets.append(
            {"upto": start + len(part), "median_ms": statistics.median(part) * 1000, "max_ms": max(part) * 1000}
        )
    return buckets


def first_degradation(buckets: Sequence[dict[str, float]], factor: float = DEGRADED_FACTOR) -> int | None:
    """The cluster size (``upto``) of the first bucket whose median launch time is ``factor`` times the first
    bucket's, or None when none is."""
    if not buckets:
        return None
    base = buckets[0]["median_ms"]
    for bucket in buckets[1:]:
        if bucket["median_ms"] >= factor * base:
            return int(bucket["upto"])
    return None


def profile_lines(
    profile: cProfile.Profile, top: int = 8, skip: Sequence[str] = ("{method 'poll'", "select")
) -> list[str]:
    """The ``top`` functions by own (internal) time: ``"own_s cum_s calls file:line(name)"``, event-loop waits
    (``skip``) left out."""
    profile.create_stats()
    if not profile.stats:  # nothing was profiled
        return []
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, name), (_cc, calls, own, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{_short(filename)}:{line}({name})"
        if any(s in where for s in skip):
            continue
        rows.append((own, cum, calls, where))
    rows.sort(reverse=True)
    return [f"{own:.3f}s own {cum:.3f}s cum {calls} calls {where}" for own, cum, calls, where in rows[:top]]


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/work/main/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# -- running -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scale:
    """One simulated cluster: ``workers`` stand-ins, ``replicas`` one-replica models launched."""

    workers: int = 100
    replicas: int = 1000
    bucket: int = 100
    heartbeat_seconds: float = 10.0
    #: stop launching once this many seconds went by (a degraded cluster still reports how far it got)
    launch_budget: float = 240.0


def _hardware() -> dict[str, Any]:
    from xinference.engines.libraries import library_verdicts
    from xinference.hardware import detect_hardware

    report = detect_hardware().model_dump(mode="json")
    report.update({"ram_total_bytes": 1 << 40, "ram_free_bytes": 1 << 40, "cpu_count": 64, "gpus": []})
    return {**report, "engines": library_verdicts()}


async def _launch_all(supervisor: Any, scale: Scale) -> tuple[list[float], list[str]]:
    """Launch one-replica models until ``scale.replicas`` or the time budget; returns each launch's seconds and the
    profile of the last bucket reached (its final tenth of launches is profiled: their times include cProfile's
    overhead, which the bucket's median shrugs off)."""
    times: list[float] = []
    kept: list[str] = []
    profile: cProfile.Profile | None = None
    sampled = max(1, scale.bucket // 10)
    began = time.perf_counter()
    for i in range(scale.replicas):
        if i % scale.bucket == scale.bucket - sampled:
            profile = cProfile.Profile()
            profile.enable()
        started = time.perf_counter()
        await supervisor.launch_model({**LAUNCH, "model_uid": f"sim-{i:05d}"})
        times.append(time.perf_counter() - started)
        if profile is not None and (i % scale.bucket == scale.bucket - 1 or i == scale.replicas - 1):
            profile.disable()
            kept, profile = profile_lines(profile), None
        if time.perf_counter() - began > scale.launch_budget:
            break
    if profile is not None:
        profile.disable()
        kept = profile_lines(profile)
    return times, kept


async def _routes(supervisor: Any, uids: list[str]) -> dict[str, Any]:
    """Route refreshes, and ``GET /v1/models`` through the API's own route (``api/admin/models/router.py``, in a FastAPI
    app called in-process: routing, ``ModelsService.list`` and the route's JSON encoding, no socket)."""
    import httpx
    from fastapi import FastAPI

    from xinference.api.admin.models.router import attach_router
    from xinference.api.admin.models.serving import ModelsService
    from xinference.api.gateway.routes import RouteTable

    table = RouteTable(supervisor)
    app = FastAPI()
    app.state.models = ModelsService(supervisor, table)
    attach_router(app)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
    profile = cProfile.Profile()
    refresh: list[float] = []
    listing: list[float] = []
    profile.enable()
    for _ in range(5):
        started = time.perf_counter()
        table.invalidate()
        await table.refresh()
        refresh.append(time.perf_counter() - started)
        started = time.perf_counter()
        reply = await client.get("/v1/models")
        reply.raise_for_status()
        body = reply.content
        listing.append(time.perf_counter() - started)
    profile.disable()
    await client.aclose()
    started = time.perf_counter()
    for uid in uids:
        await table.get(uid)
    lookup = (time.perf_counter() - started) / max(1, len(uids))
    return {
        "refresh_ms": statistics.median(refresh) * 1000,
        "list_models_ms": statistics.median(listing) * 1000,
        "list_models_bytes": len(body),
        "cached_lookup_us": lookup * 1e6,
        "routes": len(table.all()),
        "profile": profile_lines(profile),
    }


async def _heartbeats(workers: list[Any], seconds: float) -> dict[str, Any]:
    """CPU/s with every stand-in beating (as it has since it joined), then for a short window with the beats
    paused (shorter than the worker timeout, so nobody is declared gone); the difference is the heartbeat load."""
    from xinference import settings

    interval = settings.heartbeat_interval()
    before = sum([await worker.beat_count() for worker in workers])
    profile = cProfile.Profile()
    profile.enable()
    beating = await _cpu_per_second(seconds)
    profile.disable()
    beats = sum([await worker.stop_heartbeat() for worker in workers]) - before
    quiet = await _cpu_per_second(min(seconds, settings.worker_timeout() / 3))
    return {
        "interval_s": interval,
        "workers": len(workers),
        "beats": beats,
        "cpu_per_s_idle": quiet,
        "cpu_per_s_beating": beating,
        "cpu_per_s_added": max(0.0, beating - quiet),
        "cpu_ms_per_beat": max(0.0, beating - quiet) * seconds / max(1, beats) * 1000,
        "profile": profile_lines(profile),
    }


async def _cpu_per_second(seconds: float) -> float:
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


async def run_scale(scale: Scale) -> dict[str, Any]:
    """Build the cluster, launch, read the routes, heartbeat; returns every figure and profile."""
    from xinference import settings
    from xinference.core.supervisor import SupervisorActor

    hardware = _hardware()
    main_pool = await xo.create_actor_pool("127.0.0.1", n_process=0)
    pools = []
    try:
        supervisor = await xo.create_actor(
            SupervisorActor, address=main_pool.external_address, uid=SupervisorActor.default_uid()
        )
        started = time.perf_counter()
        workers = []
        for i in range(scale.workers):
            pool = await xo.create_actor_pool("127.0.0.1", n_process=0)
            pools.append(pool)
            worker = await xo.create_actor(
                StandInWorker, hardware, i, address=pool.external_address, uid=StandInWorker.default_uid()
            )
            await supervisor.add_worker(pool.external_address, hardware)
            await worker.start_heartbeat(main_pool.external_address, settings.heartbeat_interval())
            workers.append(worker)
        join_seconds = time.perf_counter() - started
        times, launch_profile = await _launch_all(supervisor, scale)
        buckets = bucket_medians(times, scale.bucket)
        routes = await _routes(supervisor, [f"sim-{i:05d}" for i in range(len(times))])
        beats = await _heartbeats(workers, scale.heartbeat_seconds)
    finally:
        for pool in [*pools, main_pool]:
            await pool.stop()
    return {
        "scale": asdict(scale),
        "join_seconds": join_seconds,
        "launched": len(times),
        "launch": {
            "buckets": buckets,
            "degraded_at": first_degradation(buckets),
            "profile": launch_profile,
            "total_seconds": sum(times),
        },
        "routes": routes,
        "heartbeat": beats,
    }


def render_markdown(reports: Sequence[dict[str, Any]], notes: str = "") -> str:
    """The result page: per cluster size, launch times by bucket, route and listing costs, heartbeat CPU, and the
    profile lines; ``notes`` (findings, next fixes) follow."""
    lines = [
        "# Control plane at scale (simulated)",
        "",
        "Real SupervisorActor and API route cache, stand-in workers (no engines), all in one process; each "
        "stand-in in its own xoscar pool, so calls cross a socket. Measured on a shared 2-core machine: "
        "absolute times are noisy, the growth with cluster size is the finding.",
        "",
    ]
    for report in reports:
        s, launch, routes, beat = report["scale"], report["launch"], report["routes"], report["heartbeat"]
        lines += [
            f"## {s['workers']} workers, {report['launched']} of {s['replicas']} replicas launched",
            "",
            f"Join of all workers: {report['join_seconds']:.1f} s. Launch times (ms) as the cluster fills:",
            "",
            "| models running | median | max |",
            "|---:|---:|---:|",
        ]
        lines += [f"| {b['upto']} | {b['median_ms']:.1f} | {b['max_ms']:.1f} |" for b in launch["buckets"]]
        degraded = launch["degraded_at"]
        lines += [
            "",
            f"Degraded (median ≥ {DEGRADED_FACTOR:g}× the first bucket's) from: "
            f"{degraded if degraded is not None else 'never'} models.",
            "",
            f"Route refresh of {routes['routes']} routes: {routes['refresh_ms']:.1f} ms; `GET /v1/models` "
            f"(list + entries + JSON, {routes['list_models_bytes'] / 1e6:.2f} MB): "
            f"{routes['list_models_ms']:.1f} ms; cached route lookup: {routes['cached_lookup_us']:.1f} µs.",
            "",
            f"Heartbeats ({beat['workers']} workers every {beat['interval_s']:g} s, {beat['beats']} beats): "
            f"process CPU {beat['cpu_per_s_beating'] * 100:.1f}% of a core vs {beat['cpu_per_s_idle'] * 100:.1f}"
            f"% without; {beat['cpu_ms_per_beat']:.2f} ms CPU per beat (both sides).",
            "",
        ]
        for title, profile in (
            ("last launch bucket", launch["profile"]),
            ("route refresh + listing", routes["profile"]),
            ("heartbeats", beat["profile"]),
        ):
            lines += [f"Profile, {title} (own time):", "", "```", *profile, "```", ""]
    if notes:
        lines += [notes.rstrip(), ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Simulate the control plane with stand-in workers.")
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--push", action="store_true", help="also run 300 workers / 5,000 replicas")
    parser.add_argument("--heartbeat-seconds", type=float, default=10.0)
    parser.add_argument("--launch-budget", type=float, default=240.0)
    parser.add_argument("--notes", type=Path, default=None, help="markdown appended to the page (findings)")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--md-out", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (also called by ``benchmark.run_all``): each cluster size in a fresh XINFERENCE_HOME."""
    import logging

    args = parse_args(argv)
    logging.getLogger("xinference").setLevel(logging.WARNING)
    sizes = [
        Scale(args.workers, args.replicas, max(1, args.replicas // 10), args.heartbeat_seconds, args.launch_budget)
    ]
    if args.push:
        sizes.append(Scale(300, 5000, 500, args.heartbeat_seconds, args.launch_budget))
    reports: list[dict[str, Any]] = []
    notes = args.notes.read_text() if args.notes else ""
    for scale in sizes:
        with tempfile.TemporaryDirectory(prefix="scale-sim-") as home:
            os.environ["XINFERENCE_HOME"] = home
            reports.append(asyncio.run(run_scale(scale)))
            print(f"{scale.workers} workers: {reports[-1]['launched']} launched", file=sys.stderr)
        text = render_markdown(reports, notes)  # written after each size: a later one may take long or fail
        if args.json_out:
            args.json_out.write_text(json.dumps({"runs": reports}, indent=1) + "\n")
        if args.md_out:
            args.md_out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
