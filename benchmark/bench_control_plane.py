"""What the control plane costs: start-up, model launch, idle memory, management-call latency.

Measures, on this machine::

    python -m benchmark.bench_control_plane --json-out control_plane.json
    python -m benchmark.bench_control_plane --start-only --ready-runs 5   # ready time, idle RSS, imports only

* time to ready: ``xinference-local`` spawned → ``GET /status`` answers 200 (several fresh starts, median), the
  part of it the server itself logs (pool, actors, HTTP) — the rest is interpreter start and imports — and the CPU
  seconds the platform's processes spent until ready (what other load on the machine changes least);
* imports: ``python -X importtime -c "import xinference.deploy.local"`` in a fresh interpreter, the slowest
  top-level packages (cumulative) and the import's CPU time and peak RSS;
* model launch: wall time of ``POST /v1/models`` against the engine's bare load, ``xllamacpp.Server(params)`` in a
  fresh process with the same parameters (runs alternate raw/platform), plus the load time the model process logs;
* idle memory: RSS (and USS) of the platform's own processes once ready, and after a launch with the model's
  subprocess reported apart, next to the raw engine process;
* ``GET /v1/models`` (and ``/status``) latency over many sequential calls;
* a tiny non-streamed completion (``max_tokens`` 1, cached prompt) through the platform vs the raw engine.

Every server is started fresh in a temporary ``XINFERENCE_HOME`` and stopped at the end.

The same figures per engine (install, launch, first token for llama.cpp, Transformers, vLLM and MLX) are in
:mod:`benchmark.engine_launch`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/bench_control_plane.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import psutil

from benchmark import _proc
from benchmark.stats import percentile

MODEL_UID = "bench-control"
_READY_LOG = re.compile(r"Xinference ready at \S+ in ([0-9.]+)s")
_LOADED_LOG = re.compile(r"loaded with \S+ in ([0-9.]+)s")
TINY_PROMPT = "Say hi."


@dataclass(frozen=True)
class ControlPlaneConfig:
    ready_runs: int = 3
    launch_runs: int = 3
    list_calls: int = 200
    tiny_calls: int = 30
    n_parallel: int = 4
    n_ctx: int = 8192
    settle_seconds: float = 1.0  # after ready, before idle memory is read
    quiet_wait: float = 20.0  # seconds to wait for other load to pass before each timed start
    patience: float = 120.0  # seconds, in all, that waiting for other load to pass may take
    start_only: bool = False  # ready time, idle memory and the import profile only (no launch, no latencies)


#: What ``xinference-local`` imports before it serves
START_IMPORT = "import xinference.deploy.local"
#: Libraries the start path must not import (``tests/deploy/test_startup_imports.py`` fails on them too): the import
#: profile names any that came back
HEAVY_AT_START = frozenset(
    {"pandas", "scipy", "torch", "transformers", "numba", "sklearn", "PIL"}
    | {"jinja2", "mcp", "mcp_types", "httpx", "rich", "pygments"}
)
_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s+)(\S+)$")


# -- pure parts --------------------------------------------------------------------------------------------------
def parse_importtime(text: str, top: int = 12) -> list[dict[str, Any]]:
    """The ``top`` slowest packages of a ``-X importtime`` report, by cumulative microseconds.

    Only the first module of each top-level package that the interpreter imported directly (depth 1 in the
    report's tree) or any ``xinference`` module at depth <= 3 is ranked: what a start-up change can move.
    """
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        found = _IMPORTTIME.match(line.rstrip())
        if not found:
            continue
        self_us, cumulative_us, indent, name = int(found[1]), int(found[2]), found[3], found[4]
        depth = (len(indent) - 1) // 2
        if depth <= 1 or (name.startswith("xinference") and depth <= 3):
            rows.append(
                {"module": name, "depth": depth, "self_ms": self_us / 1000, "cumulative_ms": cumulative_us / 1000}
            )
    rows.sort(key=lambda row: row["cumulative_ms"], reverse=True)
    return rows[:top]


def tree_cpu_seconds(processes: Sequence[psutil.Process]) -> float:
    """User + system CPU seconds of ``processes`` (those still alive)."""
    spent = 0.0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            spent += times.user + times.system
    return spent


def bytecode_env(workdir: Path) -> dict[str, str]:
    """Environment for timed starts with bytecode caches, as an installed package has them.

    A shell with ``PYTHONDONTWRITEBYTECODE`` set (this project's CI and dev shells) would otherwise compile every
    module of the checkout from source on each start; the caches go to a folder of the run, not the tree.
    """
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(workdir / "pycache")}


def warm_bytecode(env: dict[str, str]) -> None:
    """One unmeasured import of the start path, which writes the bytecode caches the timed starts then read."""
    subprocess.run(
        [sys.executable, "-c", START_IMPORT],
        env={**os.environ, **env},
        cwd=os.sep,  # no checkout on sys.path through the working directory: the same xinference as the server
        check=True,
        timeout=300,
        capture_output=True,
    )


def import_profile(statement: str = START_IMPORT, top: int = 12, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``statement`` in a fresh interpreter under ``-X importtime``: slowest packages, CPU seconds, peak RSS."""
    probe = (
        "import resource, time\n"
        f"{statement}\n"
        "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=os.sep,
        timeout=120,
        check=True,
    )
    cpu, peak = (float(v) for v in done.stdout.split())
    heavy = sorted({m["module"].split(".")[0] for m in parse_importtime(done.stderr, top=10_000)} & HEAVY_AT_START)
    return {
        "statement": statement,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak,
        "slowest": parse_importtime(done.stderr, top),
        "heavy_imported": heavy,
    }


def latency_ms(seconds: Sequence[float]) -> dict[str, float | None]:
    """Mean, p50 and p99 in milliseconds (``None`` for an empty sample)."""
    if not seconds:
        return {"mean": None, "p50": None, "p99": None, "n": 0}
    return {
        "mean": sum(seconds) / len(seconds) * 1000,
        "p50": percentile(seconds, 50) * 1000,
        "p99": percentile(seconds, 99) * 1000,
        "n": len(seconds),
    }


def median_or_none(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def last_logged_seconds(pattern: re.Pattern[str], text: str) -> float | None:
    """The number captured by ``pattern`` in its last match in ``text`` (a log), ``None`` when absent."""
    found = pattern.findall(text)
    return float(found[-1]) if found else None


def _logged(pattern: re.Pattern[str], path: Path, wait: float = 1.0) -> float | None:
    """:func:`last_logged_seconds` of a log file, allowing the writer ``wait`` seconds to flush the line."""
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError):
            found = last_logged_seconds(pattern, path.read_text(errors="replace"))
            if found is not None:
                return found
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# -- measuring -----------------------------------------------------------------------------------------------------
def _describe(processes: Sequence[psutil.Process]) -> list[dict[str, Any]]:
    rows = []
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            info = proc.memory_full_info()
            rows.append(
                {
                    "pid": proc.pid,
                    "cmdline": " ".join(proc.cmdline()[1:4]),
                    "rss_mb": info.rss / (1 << 20),
                    "uss_mb": info.uss / (1 << 20),
                }
            )
    return rows


def memory(processes: Sequence[psutil.Process]) -> dict[str, Any]:
    """Summed RSS and USS (MiB) of ``processes``, with the per-process rows."""
    rows = _describe(processes)
    return {
        "rss_mb": sum(row["rss_mb"] for row in rows),
        "uss_mb": sum(row["uss_mb"] for row in rows),
        "processes": rows,
    }


def timed_calls(client: httpx.Client, count: int, call: Callable[[httpx.Client], httpx.Response]) -> list[float]:
    """Wall seconds of ``count`` sequential calls; a non-200 answer raises."""
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        response = call(client)
        seconds.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"{response.request.url}: HTTP {response.status_code}: {response.text[:300]}")
    return seconds


def _tiny_body(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": TINY_PROMPT}],
        "max_tokens": 1,
        "temperature": 0,
    }


def tiny_completions(raw_api: str, our_api: str, model_uid: str, calls: int) -> dict[str, Any]:
    """Interleaved raw/ours non-streamed 1-token completions of one cached prompt; p50 added by the platform."""
    timings: dict[str, list[float]] = {"raw": [], "ours": []}
    targets = {"raw": (raw_api, "raw"), "ours": (our_api, model_uid)}
    with _proc.http_client() as client:
        for api, model in targets.values():  # warm: connection, prompt cache
            client.post(f"{api}/chat/completions", json=_tiny_body(model)).raise_for_status()
        for _ in range(calls):
            for side, (api, model) in targets.items():
                body = _tiny_body(model)
                timings[side] += timed_calls(
                    client, 1, lambda c, a=api, b=body: c.post(f"{a}/chat/completions", json=b)
                )
    raw, ours = latency_ms(timings["raw"]), latency_ms(timings["ours"])
    added = None if raw["p50"] is None or ours["p50"] is None else ours["p50"] - raw["p50"]
    return {"raw_ms": raw, "ours_ms": ours, "added_p50_ms": added}


def measure_ready(
    config: ControlPlaneConfig, workdir: Path, patience: _proc.Patience, log: Any
) -> tuple[dict[str, Any], _proc.Platform]:
    """Fresh starts of ``xinference-local``; all but the last are stopped, the last is returned running."""
    ready, internal, foreign, cpu = [], [], [], []
    started: list[_proc.Platform] = []  # the CPU of the server being started counts as ours, not foreign
    watch = _proc.LoadWatch(lambda: [proc for server in started[-1:] for proc in server.tree()])
    env = bytecode_env(workdir)
    warm_bytecode(env)
    for run in range(config.ready_runs):
        patience.wait_for_quiet(config.quiet_wait)
        watch.start()
        platform = _proc.start_platform(workdir / f"home-{run}", extra_env=env)
        started.append(platform)
        cpu.append(tree_cpu_seconds(platform.tree()))
        foreign.append(watch.stop())
        ready.append(platform.ready_seconds)
        internal.append(_logged(_READY_LOG, platform.log_path))
        log(f"ready run {run}: {platform.ready_seconds:.2f}s (server-logged part {internal[-1]}s, CPU {cpu[-1]:.2f}s)")
        if run < config.ready_runs - 1:
            platform.stop()
    return {
        "ready_seconds": ready,
        "ready_seconds_median": median_or_none(ready),
        "ready_logged_seconds": internal,
        "ready_cpu_seconds": cpu,
        "ready_cpu_seconds_median": median_or_none(cpu),
        "foreign_share": foreign,
    }, started[-1]


def measure_launches(
    config: ControlPlaneConfig,
    platform: _proc.Platform,
    workdir: Path,
    later: Callable[[Any], Any],
    patience: _proc.Patience,
    log: Any,
) -> tuple[dict[str, Any], _proc.RawServer]:
    """Platform launches vs bare engine loads in fresh processes, alternating; the last of each stays running.

    A first, unmeasured launch tells which engine settings the platform resolves (the raw side copies them) and,
    with one unmeasured raw load, warms the page cache for both sides.
    """
    options = {"n_ctx": config.n_ctx, "n_parallel": config.n_parallel}
    api_pids = {p.pid for p in platform.tree()}
    model_log = platform.home / "logs" / "models" / f"{MODEL_UID}-0.log"
    first = _proc.launch_model(platform.api, MODEL_UID, options)
    settings = _proc.EngineSettings.from_engine_config(_proc.engine_config(platform.api, MODEL_UID))
    _proc.terminate_model(platform.api, MODEL_UID)
    _proc.start_raw_server(settings, workdir / "raw-warm.log").stop()
    log(f"first launch (unmeasured): {first:.2f}s")
    launch: list[float] = []
    logged: list[float | None] = []
    load: list[float] = []
    raw_ready: list[float] = []
    for run in range(config.launch_runs):
        last = run == config.launch_runs - 1
        patience.wait_for_quiet(config.quiet_wait)
        raw = _proc.start_raw_server(settings, workdir / f"raw-{run}.log")
        load.append(raw.load_seconds)
        raw_ready.append(raw.ready_seconds)
        if last:
            later(raw)
        else:
            raw.stop()
        patience.wait_for_quiet(config.quiet_wait)
        launch.append(_proc.launch_model(platform.api, MODEL_UID, options))
        logged.append(_logged(_LOADED_LOG, model_log))
        log(
            f"launch run {run}: POST /v1/models {launch[-1]:.2f}s (model process logged {logged[-1]}s); "
            f"bare engine load {load[-1]:.2f}s ({raw_ready[-1]:.2f}s from process start)"
        )
        if not last:
            _proc.terminate_model(platform.api, MODEL_UID)
    tree = platform.tree()
    return {
        "engine_settings": settings.as_dict(),
        "launch_first_seconds": first,
        "launch_seconds": launch,
        "launch_seconds_median": median_or_none(launch),
        "model_logged_load_seconds": logged,
        "engine_load_seconds": load,
        "engine_load_seconds_median": median_or_none(load),
        "engine_process_ready_seconds": raw_ready,
        "engine_process_ready_seconds_median": median_or_none(raw_ready),
        "platform_after_launch": memory([p for p in tree if p.pid in api_pids]),
        "model_process": memory([p for p in tree if p.pid not in api_pids]),
        "raw_engine_process": memory(raw.tree()),
    }, raw


def measure_latencies(config: ControlPlaneConfig, platform: _proc.Platform) -> dict[str, Any]:
    """Sequential ``GET /v1/models`` and ``GET /status`` over one keep-alive connection."""
    with _proc.http_client() as client:
        timed_calls(client, 5, lambda c: c.get(f"{platform.api}/models"))  # warm
        models = timed_calls(client, config.list_calls, lambda c: c.get(f"{platform.api}/models"))
        status = timed_calls(client, config.list_calls, lambda c: c.get(f"{platform.endpoint}/status"))
    return {"list_models_ms": latency_ms(models), "status_ms": latency_ms(status)}


def run_control_plane(config: ControlPlaneConfig, workdir: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Every control-plane measurement; all servers are stopped before it returns."""
    if workdir is not None:
        return _run(config, workdir, log)
    with tempfile.TemporaryDirectory(prefix="xinf-control-") as tmp:
        return _run(config, Path(tmp), log)


def _run(config: ControlPlaneConfig, workdir: Path, log: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"config": asdict(config)}
    patience = _proc.Patience(config.patience)
    with _proc.stopping_later() as later:
        ready, platform = measure_ready(config, workdir, patience, log)
        later(platform)
        result.update(ready)
        time.sleep(config.settle_seconds)
        result["idle"] = memory(platform.tree())
        log(f"idle memory: {result['idle']['rss_mb']:.0f} MiB RSS, {result['idle']['uss_mb']:.0f} MiB USS")
        result["imports"] = import_profile(env=bytecode_env(workdir))
        log(
            f"imports: {result['imports']['cpu_seconds']:.2f} s CPU, peak {result['imports']['peak_rss_mb']:.0f} MiB; "
            + ", ".join(f"{m['module']} {m['cumulative_ms']:.0f} ms" for m in result["imports"]["slowest"][:6])
        )
        if config.start_only:
            return result
        launches, raw = measure_launches(config, platform, workdir, later, patience, log)
        result.update(launches)
        result.update(measure_latencies(config, platform))
        log(
            f"GET /v1/models p50 {result['list_models_ms']['p50']:.2f} ms, p99 {result['list_models_ms']['p99']:.2f} ms"
        )
        if config.tiny_calls > 0:
            result["tiny_completion"] = tiny_completions(raw.api, platform.api, MODEL_UID, config.tiny_calls)
            log(f"tiny completion: +{result['tiny_completion']['added_p50_ms']:.2f} ms p50 through the platform")
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = ControlPlaneConfig()
    parser = argparse.ArgumentParser(description="Start-up, launch, memory and latency of the control plane.")
    parser.add_argument("--ready-runs", type=int, default=defaults.ready_runs)
    parser.add_argument("--launch-runs", type=int, default=defaults.launch_runs)
    parser.add_argument("--list-calls", type=int, default=defaults.list_calls)
    parser.add_argument("--tiny-calls", type=int, default=defaults.tiny_calls, help="0 skips the comparison")
    parser.add_argument("--n-parallel", type=int, default=defaults.n_parallel)
    parser.add_argument("--n-ctx", type=int, default=defaults.n_ctx)
    parser.add_argument("--quiet-wait", type=float, default=defaults.quiet_wait)
    parser.add_argument("--patience", type=float, default=defaults.patience)
    parser.add_argument(
        "--start-only", action="store_true", help="ready time, idle memory and imports only (no model launched)"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> ControlPlaneConfig:
    return ControlPlaneConfig(
        ready_runs=args.ready_runs,
        launch_runs=args.launch_runs,
        list_calls=args.list_calls,
        tiny_calls=args.tiny_calls,
        n_parallel=args.n_parallel,
        n_ctx=args.n_ctx,
        quiet_wait=args.quiet_wait,
        patience=args.patience,
        start_only=args.start_only,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ready_runs < 1 or args.launch_runs < 1:
        raise SystemExit("--ready-runs and --launch-runs must be >= 1")
    _proc.exit_on_sigterm()
    result = run_control_plane(config_from_args(args))
    runs = ", ".join(f"{v:.2f}" for v in result["ready_seconds"])
    print(
        f"ready median {result['ready_seconds_median']:.2f} s (runs {runs}),"
        f" CPU to ready median {result['ready_cpu_seconds_median']:.2f} s, idle RSS {result['idle']['rss_mb']:.0f} MiB"
    )
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
