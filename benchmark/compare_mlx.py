"""What the platform costs on top of MLX: mlx-lm's own server against ``xinference-local`` serving MLX.

Side ``ours`` is ``xinference-local`` with SmolLM2-135M (safetensors, :mod:`benchmark._weights`) launched with
``model_engine=MLX``: mlx-lm runs inside the model process, batched by the platform's scheduler. Side ``raw`` is
``python -m mlx_lm.server`` from the same env, set up with the platform's resolved batch sizes, BLAS and rope fix
(:mod:`benchmark._raw_mlx`). Requests, the A/B schedule, the retries on a busy machine and the figures are those of
:mod:`benchmark.compare_engine`; the raw side's requests ban EOS through ``logit_bias`` (it has no ``ignore_eos``)::

    python -m benchmark.compare_mlx --rounds 7 --concurrency 1,4 --json-out mlx.json

On Linux this is ``mlx[cpu]``: ~11-15 tok/s for a 135M model on two cores, hence the small defaults.
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

if __package__ in (None, ""):  # run as ``python benchmark/compare_mlx.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark import _engines, _proc, _raw_mlx
from benchmark._weights import converted_smollm2
from benchmark.compare_engine import CompareConfig, Target, ab_result, format_comparison, run_schedule
from benchmark.intervals import MIN_ROUNDS

__all__ = ["DEFAULTS", "resolved_settings", "run_mlx_compare"]

ENGINE = "MLX"
MODEL_NAME = "smollm2-mlx-bench"
MODEL_UID = "bench-mlx"
RAW_NAME = "default_model"  # mlx_lm.server: the model given by --model
#: ``n_parallel`` is MLX's ``max_num_seqs``, ``n_ctx`` its ``max_model_len``.
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


def resolved_settings(engine_config: dict[str, Any], config: CompareConfig, cpu_count: int) -> dict[str, int]:
    """Batch size, prefill step, prompt cache size and BLAS threads the platform's model runs with (its
    ``engine_config``), falling back to what :class:`~xinference.engines.mlx.config.MLXConfig` resolves where a
    value is not reported."""
    from xinference.engines.mlx.config import MLXConfig

    fallback = MLXConfig(max_num_seqs=config.n_parallel, max_model_len=config.n_ctx).resolve(
        cpu_count=cpu_count, metal=False, context_length=config.n_ctx
    )
    keys = ("max_num_seqs", "prefill_step_size", "prompt_cache_size", "n_threads")
    return {
        key: int(engine_config[key] if engine_config.get(key) is not None else getattr(fallback, key)) for key in keys
    }


def run_mlx_compare(config: CompareConfig = DEFAULTS, workdir: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Start both servers, run the A/B schedule, stop both; returns the JSON-able result."""
    if workdir is not None:
        return _run(config, workdir, log)
    with tempfile.TemporaryDirectory(prefix="xinf-compare-mlx-") as tmp:
        return _run(config, Path(tmp), log)


def _run(config: CompareConfig, workdir: Path, log: Any) -> dict[str, Any]:
    from xinference.engines.mlx.runtime import config_overrides, find_openblas
    from xinference.hardware import detect_hardware

    python = _engines.ensure_env(ENGINE)
    weights = converted_smollm2()
    patience = _proc.Patience(config.patience)
    with _proc.stopping_later() as later:
        log("starting xinference-local ...")
        platform = later(
            _proc.start_platform(workdir / "home", extra_env={"XINFERENCE_ENVS_DIR": str(_engines.envs_dir())})
        )
        before = {p.pid for p in platform.tree()}
        _engines.register_family(platform.api, _engines.pytorch_family(MODEL_NAME, weights, config.n_ctx))
        options = {"max_num_seqs": config.n_parallel, "max_model_len": config.n_ctx}
        launch_s = _engines.launch(platform.api, MODEL_UID, MODEL_NAME, ENGINE, options)
        model_procs = _engines.new_processes(platform, before)
        api_procs = [p for p in platform.tree() if p.pid in before]
        settings = resolved_settings(_proc.engine_config(platform.api, MODEL_UID), config, detect_hardware().cpu_count)
        log(f"MLX launched on the platform in {launch_s:.1f}s with {settings}")
        model_dir = _raw_mlx.patched_model_dir(weights, workdir / "raw-model", config_overrides(weights))
        port = _proc.free_port()
        command = _raw_mlx.server_command(
            python,
            model_dir,
            port,
            max_num_seqs=settings["max_num_seqs"],
            prefill_step_size=settings["prefill_step_size"],
            prompt_cache_size=settings["prompt_cache_size"],
        )
        env = _raw_mlx.server_env(settings["n_threads"], find_openblas())
        raw = later(_engines.start_raw("raw mlx_lm.server", command, port, env, workdir / "raw-mlx.log"))
        log(f"raw mlx_lm.server serving at {raw.base_url} (ready in {raw.ready_seconds:.1f}s)")
        raw_procs = raw.tree()
        targets = {
            "raw": Target(
                "raw",
                raw.api,
                RAW_NAME,
                {"engine": raw_procs},
                {"engine": lambda: _proc.cpu_seconds(raw_procs)},
                extra_body=_raw_mlx.eos_bias(_raw_mlx.eos_token_ids(weights)),
            ),
            "ours": Target(
                "ours",
                platform.api,
                MODEL_UID,
                {"api": api_procs, "model": model_procs},
                {
                    "api": lambda: _proc.cpu_seconds(api_procs),
                    "model": lambda: _proc.cpu_seconds(model_procs),
                    # the actor's event loop runs on the process's main thread; decoding on the scheduler's thread
                    "model_loop": lambda: _proc.thread_cpu_seconds(model_procs[0], model_procs[0].pid),
                },
            ),
        }
        records = run_schedule(targets, config, lambda: [*raw.tree(), *platform.tree()], patience, log)
    return {
        **ab_result(config, records),
        "engine": ENGINE,
        "engine_settings": settings,
        "launch_seconds": launch_s,
        "raw_ready_seconds": raw.ready_seconds,
        "raw_command": command[1:],
        "raw_env": env,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="mlx-lm's own server vs Xinference serving MLX, same model.")
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
    result = run_mlx_compare(config_from_args(args))
    print()
    print(format_comparison(result["levels"]))
    for problem in result["problems"]:
        print(f"problem: {problem}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2, allow_nan=False))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
