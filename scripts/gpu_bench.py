"""The GPU-shaped benchmark, in one go for when a machine with an NVIDIA GPU is lent: prints a table, writes JSON.

Parts (each runs on its own; one that fails is reported with its error and the others still run):

1. **vLLM and SGLang, ours against raw** at c=1 and c=4: SmolLM2-135M-Instruct (safetensors converted from the
   bundled GGUF by :mod:`benchmark._weights`, so no hub is needed) launched on the platform with the engine, and a
   second server of the same engine started with the very command line and engine variables of the platform's
   (port, served name and API key apart: :mod:`benchmark._raw_vllm`'s way). Both share the GPU, so each gets
   a third of its memory. Measured with :func:`benchmark.compare_engine.run_schedule` (interleaved rounds, fresh
   prompts, warm-up), figures and intervals from :func:`benchmark.compare_engine.ab_result`.
2. **diffusers seconds per image**, ours against the pipeline called in-process, on the GPU in float16
   (:mod:`benchmark.compare_images` with ``device="cuda"``; its tiny pipeline: the platform's overhead per image).
3. **faster-whisper float16 RTF**, ours against raw faster-whisper on the GPU (:mod:`benchmark.compare_stt` with
   ``device="cuda"``).

Usage, from the repository root with the project installed in the current Python::

    python scripts/gpu_bench.py                            # everything, 3 rounds (~10 minutes once envs exist)
    python scripts/gpu_bench.py --parts images,whisper --rounds 2 --out /tmp/gpu
    python scripts/gpu_bench.py --parts vLLM --skip-install   # the engine env must already be there

The engine environments are installed by the project's own recipe when missing (``--skip-install`` refuses
instead); that needs the package index or a wheel folder in ``PIP_FIND_LINKS``. Exit code 0 when every part ran.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmark import _engines, _proc, _raw_vllm  # noqa: E402
from benchmark.compare_engine import CompareConfig, Target, ab_result, run_schedule  # noqa: E402
from benchmark.intervals import Estimate, format_estimate  # noqa: E402

PARTS = ("vLLM", "SGLang", "images", "whisper")
#: The engine's OpenAI server module, found among the platform's model processes
SERVER_MODULE = {"vLLM": "vllm.entrypoints.openai.api_server", "SGLang": "sglang.launch_server"}
#: Launch options per engine: a small context and batch, and a third of the GPU each (two servers share it)
LAUNCH_OPTIONS: dict[str, dict[str, Any]] = {
    "vLLM": {"max_model_len": 2048, "max_num_seqs": 8, "gpu_memory_utilization": 0.3},
    "SGLang": {"context_length": 2048, "max_running_requests": 8, "mem_fraction_static": 0.3},
}
#: Engine variables of the platform's server copied to the raw one (its API key is not)
COPIED_PREFIXES = ("VLLM_", "SGLANG_", "CUDA_", "NCCL_", "OMP_", "HF_", "TRANSFORMERS_", "LD_PRELOAD")
NOT_COPIED = frozenset({"VLLM_API_KEY", "SGLANG_API_KEY"})


def engine_config(rounds: int) -> CompareConfig:
    return CompareConfig(
        rounds=rounds,
        concurrency=(1, 4),
        num_prompts=16,
        max_tokens=128,
        n_parallel=8,
        n_ctx=2048,
        warmup_prompts=4,
        quiet_wait=5.0,
        patience=60.0,
    )


def without_api_key(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--api-key VALUE`` (or ``--api-key=VALUE``): the raw server answers without one."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--api-key":
            next(args, None)
        elif not arg.startswith("--api-key="):
            out.append(arg)
    return out


def copied_env(environ: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k.startswith(COPIED_PREFIXES) and k not in NOT_COPIED}


def compare_managed(engine: str, config: CompareConfig, install: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Ours against the engine's own server, both on the GPU, same command line."""
    if _engines.engine_python(engine) is None and not install:
        raise RuntimeError(f"{engine}'s environment is not installed (run without --skip-install)")
    _engines.ensure_env(engine)
    from benchmark._weights import converted_smollm2

    weights = converted_smollm2()
    name, uid = f"smollm2-{engine.lower()}-gpu", f"gpu-bench-{engine.lower()}"
    options = LAUNCH_OPTIONS[engine]
    with tempfile.TemporaryDirectory(prefix=f"gpu-bench-{engine.lower()}-") as tmp, _proc.stopping_later() as later:
        work = Path(tmp)
        platform = later(
            _proc.start_platform(work / "home", extra_env={"XINFERENCE_ENVS_DIR": str(_engines.envs_dir())})
        )
        before = {p.pid for p in platform.tree()}
        _engines.register_family(platform.api, _engines.pytorch_family(name, weights, config.n_ctx))
        launch_s = _engines.launch(platform.api, uid, name, engine, options)
        model_procs = _engines.new_processes(platform, before)
        server = next((p for p in model_procs if SERVER_MODULE[engine] in p.cmdline()), None)
        if server is None:
            raise RuntimeError(f"no {SERVER_MODULE[engine]} process under the platform's model")
        engine_procs = [server, *server.children(recursive=True)]
        actor_procs = [p for p in model_procs if p.pid not in {e.pid for e in engine_procs}]
        api_procs = [p for p in platform.tree() if p.pid in before]
        log(f"{engine}: launched on the platform in {launch_s:.1f}s")
        port = _proc.free_port()
        command = _raw_vllm.raw_command(without_api_key(server.cmdline()), port, "raw")
        raw = later(_engines.start_raw(f"raw {engine}", command, port, copied_env(server.environ()), work / "raw.log"))
        raw_procs = raw.tree()
        targets = {
            "raw": Target(
                "raw", raw.api, "raw", {"engine": raw_procs}, {"engine": lambda: _proc.cpu_seconds(raw_procs)}
            ),
            "ours": Target(
                "ours",
                platform.api,
                uid,
                {"api": api_procs, "actor": actor_procs, "engine": engine_procs},
                {
                    "api": lambda: _proc.cpu_seconds(api_procs),
                    "actor": lambda: _proc.cpu_seconds(actor_procs),
                    "engine": lambda: _proc.cpu_seconds(engine_procs),
                },
            ),
        }
        records = run_schedule(
            targets, config, lambda: [*raw.tree(), *platform.tree()], _proc.Patience(config.patience), log
        )
    result = ab_result(config, records)
    return {**result, "engine": engine, "launch_seconds": launch_s, "launch_options": options}


def images_part(rounds: int, device: str, log: Callable[[str], None]) -> dict[str, Any]:
    from benchmark.compare_images import ImageConfig, run_comparison

    if device == "cuda":
        config = ImageConfig(rounds=rounds, images=4, steps=20, size=256, channels=(32, 64), device=device)
    else:  # --allow-cpu: the CPU defaults
        config = ImageConfig(rounds=rounds)
    return run_comparison(config, log=log)


def whisper_part(rounds: int, device: str, log: Callable[[str], None]) -> dict[str, Any]:
    from benchmark.compare_stt import run_comparison

    log(f"faster-whisper on {device} ...")
    return run_comparison(rounds, (1, 4), 4, device=device)


def _cell(data: dict[str, Any] | None, digits: int = 3, sign: bool = False) -> str:
    return format_estimate(None if data is None else Estimate.from_dict(data), digits, sign=sign)


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """``[part, figure, value]`` rows of every part that ran (its error where it failed)."""
    rows: list[list[str]] = []
    for part, result in results.items():
        if "error" in result:
            rows.append([part, "error", result["error"][:160]])
            continue
        if part in SERVER_MODULE:
            for level in result["levels"]:
                intervals = level.get("intervals") or {}
                c = level["concurrency"]
                rows.append([part, f"output tok/s ours/raw, c={c}", _cell(intervals.get("output_throughput_ratio"))])
                rows.append([part, f"TTFT p50 added ms, c={c}", _cell(intervals.get("ttft_p50_added_ms"), 1, True)])
        elif part == "images":
            summary = result["summary"]
            seconds = summary["seconds_per_image"]
            rows.append([part, "s/image raw / ours", " / ".join(f"{v:.3f}" for v in seconds.values())])
            rows.append([part, "images/s ours/raw", _cell(summary.get("images_per_second_ratio"))])
        elif part == "whisper":
            for level, spread in result["ratios"]["rtf"].items():
                raw = result["summary"]["raw faster-whisper"][level]["rtf"]
                ours = result["summary"]["platform"][level]["rtf"]
                rows.append([part, f"RTF raw / ours, {level}", f"{raw:.4f} / {ours:.4f}"])
                rows.append(
                    [
                        part,
                        f"RTF ours/raw, {level}",
                        f"{spread['mean']:.3f} [{spread['low']:.3f}, {spread['high']:.3f}]",
                    ]
                )
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-install", action="store_true", help="fail a part whose engine env is missing")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "benchmark" / "results"))
    parser.add_argument("--allow-cpu", action="store_true", help="run without a CUDA GPU (to check the script)")
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown or not args.parts:
        parser.error(f"unknown parts {unknown}; known: {', '.join(PARTS)}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        print("no CUDA GPU visible to torch (use --allow-cpu to check the script anyway)")
        return 2
    _proc.exit_on_sigterm()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.monotonic()
    results: dict[str, Any] = {}
    for part in args.parts:
        print(f"== {part} ==", flush=True)
        try:
            if part in SERVER_MODULE:
                config = engine_config(args.rounds)
                results[part] = compare_managed(part, config, not args.skip_install, print)
            elif part == "images":
                results[part] = images_part(args.rounds, device, print)
            else:
                results[part] = whisper_part(args.rounds, device, print)
        except Exception as exc:  # noqa: BLE001 - one part's failure is reported; the others still run
            results[part] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            print(f"{part}: failed: {results[part]['error']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu (--allow-cpu)"
    payload = {"device": name, "seconds": time.monotonic() - started, "parts": results}
    (args.out / "gpu_bench.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\n{name}, {payload['seconds']:.0f}s; written to {args.out / 'gpu_bench.json'}")
    for part, figure, value in summary_rows(results):
        print(f"{part:>8}  {figure:<36} {value}")
    return 0 if not any("error" in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
