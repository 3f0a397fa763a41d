"""What the platform costs on top of vLLM: vLLM's own OpenAI server against ``xinference-local`` serving it.

Side ``ours`` is ``xinference-local`` with SmolLM2-135M (safetensors, :mod:`benchmark._weights`) launched with
``model_engine=vLLM``; the platform starts vLLM's OpenAI server in the engine env and proxies every request to it
through the API process and the model actor. Side ``raw`` is a second vLLM server started with the same command
line and engine variables, read from the platform's server process (:mod:`benchmark._raw_vllm`). Requests, the A/B
schedule, the retries on a busy machine and the figures are those of :mod:`benchmark.compare_engine`::

    python -m benchmark.compare_vllm --rounds 7 --concurrency 1,4 --json-out vllm.json

vLLM's CPU build is slow on two cores (~30 tok/s single stream for a 135M model), hence the small defaults. Server
CPU is split into the platform's own processes (API, model actor: both pure overhead, since the actor only
proxies) and the engine's (vLLM's three processes), the latter next to the raw engine's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/compare_vllm.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark import _engines, _proc, _raw_vllm
from benchmark._weights import converted_smollm2
from benchmark.compare_engine import CompareConfig, Target, ab_result, format_comparison, run_schedule
from benchmark.intervals import MIN_ROUNDS

__all__ = ["DEFAULTS", "managed_platform_cpu", "run_vllm_compare"]

ENGINE = "vLLM"
MODEL_NAME = "smollm2-vllm-bench"
MODEL_UID = "bench-vllm"
RAW_NAME = "raw"
#: Small on purpose: ~2 minutes of measuring on 2 cores. ``n_parallel`` is vLLM's ``max_num_seqs``, ``n_ctx`` its
#: ``max_model_len``.
DEFAULTS = CompareConfig(
    rounds=MIN_ROUNDS,
    concurrency=(1, 4),
    num_prompts=8,
    max_tokens=32,
    n_parallel=4,
    n_ctx=2048,
    warmup_prompts=4,
    quiet_wait=20.0,
    patience=120.0,
)
KV_CACHE_GIB = 1  # two vLLM servers run side by side; 1 GiB of KV each is plenty for 4 x 2048 tokens


def launch_options(config: CompareConfig, kv_gib: int = KV_CACHE_GIB) -> dict[str, Any]:
    """The platform's launch options; the raw server copies whatever they became on vLLM's command line."""
    return {"max_model_len": config.n_ctx, "max_num_seqs": config.n_parallel, "cpu_kvcache_space_gib": kv_gib}


def managed_platform_cpu(
    cpu: dict[str, dict[str, float | None]], idle: dict[str, float | None] | None = None
) -> dict[str, float | None]:
    """Platform CPU per token when the engine is a server of its own: the API process plus the whole model actor
    (which only proxies), and how much more the proxied engine itself burned than the raw one; with ``idle`` (the
    level's ``idle_cpu_ms_per_token``), the share of the total those processes burn with no request."""
    api, actor = cpu["ours"].get("api"), cpu["ours"].get("actor")
    engine, raw = cpu["ours"].get("engine"), cpu["raw"].get("engine")
    out = {
        "api": api,
        "actor": actor,
        "total": None if api is None or actor is None else api + actor,
        "engine_minus_raw": None if engine is None or raw is None else engine - raw,
    }
    if idle:
        api_idle, actor_idle = idle.get("api"), idle.get("actor")
        out["idle_background"] = None if api_idle is None or actor_idle is None else api_idle + actor_idle
    return out


def run_vllm_compare(config: CompareConfig = DEFAULTS, workdir: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Start both servers, run the A/B schedule, stop both; returns the JSON-able result."""
    if workdir is not None:
        return _run(config, workdir, log)
    with tempfile.TemporaryDirectory(prefix="xinf-compare-vllm-") as tmp:
        return _run(config, Path(tmp), log)


def _run(config: CompareConfig, workdir: Path, log: Any) -> dict[str, Any]:
    _engines.ensure_env(ENGINE)
    weights = converted_smollm2()
    patience = _proc.Patience(config.patience)
    with _proc.stopping_later() as later:
        log("starting xinference-local ...")
        platform = later(
            _proc.start_platform(workdir / "home", extra_env={"XINFERENCE_ENVS_DIR": str(_engines.envs_dir())})
        )
        before = {p.pid for p in platform.tree()}
        _engines.register_family(platform.api, _engines.pytorch_family(MODEL_NAME, weights, config.n_ctx))
        launch_s = _engines.launch(platform.api, MODEL_UID, MODEL_NAME, ENGINE, launch_options(config))
        model_procs = _engines.new_processes(platform, before)
        server = _raw_vllm.find_server(model_procs)
        engine_procs = [server, *server.children(recursive=True)]
        actor_procs = [p for p in model_procs if p.pid not in {e.pid for e in engine_procs}]
        api_procs = [p for p in platform.tree() if p.pid in before]
        log(f"vLLM launched on the platform in {launch_s:.1f}s")
        port = _proc.free_port()
        command = _raw_vllm.raw_command(server.cmdline(), port, RAW_NAME)
        env = _raw_vllm.copied_env(server.environ())
        raw = later(_engines.start_raw("raw vLLM server", command, port, env, workdir / "raw-vllm.log"))
        log(f"raw vLLM serving at {raw.base_url} (ready in {raw.ready_seconds:.1f}s)")
        raw_procs = raw.tree()
        targets = {
            "raw": Target(
                "raw", raw.api, RAW_NAME, {"engine": raw_procs}, {"engine": lambda: _proc.cpu_seconds(raw_procs)}
            ),
            "ours": Target(
                "ours",
                platform.api,
                MODEL_UID,
                {"api": api_procs, "actor": actor_procs, "engine": engine_procs},
                {
                    "api": lambda: _proc.cpu_seconds(api_procs),
                    "actor": lambda: _proc.cpu_seconds(actor_procs),
                    "engine": lambda: _proc.cpu_seconds(engine_procs),
                },
            ),
        }
        records = run_schedule(targets, config, lambda: [*raw.tree(), *platform.tree()], patience, log)
    result = ab_result(config, records)
    for level in result["levels"]:
        level["platform_cpu_ms_per_token"] = managed_platform_cpu(
            level["cpu_ms_per_token"], level.get("idle_cpu_ms_per_token")
        )
    return {
        **result,
        "engine": ENGINE,
        "launch_seconds": launch_s,
        "raw_ready_seconds": raw.ready_seconds,
        "raw_command": command[1:],  # the interpreter's path apart
        "raw_env": env,
        "launch_options": launch_options(config),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="vLLM's own server vs Xinference serving vLLM, same model.")
    parser.add_argument("--rounds", type=int, default=DEFAULTS.rounds)
    parser.add_argument(
        "--concurrency", type=lambda text: [int(v) for v in text.split(",")], default=list(DEFAULTS.concurrency)
    )
    parser.add_argument("--num-prompts", type=int, default=DEFAULTS.num_prompts)
    parser.add_argument("--max-tokens", type=int, default=DEFAULTS.max_tokens)
    parser.add_argument("--max-num-seqs", type=int, default=DEFAULTS.n_parallel)
    parser.add_argument("--patience", type=float, default=DEFAULTS.patience)
    parser.add_argument("--json-out", type=Path, default=None)
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace, base: CompareConfig = DEFAULTS) -> CompareConfig:
    return replace(
        base,
        rounds=args.rounds,
        concurrency=tuple(args.concurrency),
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        n_parallel=args.max_num_seqs,
        patience=args.patience,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    result = run_vllm_compare(config_from_args(args))
    print()
    print(format_comparison(result["levels"]))
    for problem in result["problems"]:
        print(f"problem: {problem}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2, allow_nan=False))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
