"""The llama.cpp defaults sweep (``benchmark/llama_defaults.py``) on an NVIDIA GPU: every layer offloaded, more
slots, a 1-3B GGUF. Needs a CUDA build of xllamacpp and the GGUF on disk (no download here)::

    python scripts/gpu_llama_defaults.py /models/qwen2.5-1.5b-instruct-q4_k_m.gguf --rounds 3 \\
        --json-out gpu_defaults.json --md-out gpu_defaults.md

Grid: ``kv_unified`` on/off × ``n_parallel`` 4/8/16, then on the per-slot np=8 baseline a bigger and a smaller
batch, no ``cache_prompt``, no host-memory prompt cache, chunk reuse. The workload is the CPU sweep's (shared
system prompt, fresh user turns, a repeated first turn) at c=1, 4 and 16, with longer answers. Its result decides
``DEFAULT_GPU_SLOTS`` and whether the GPU default layout follows the CPU one (``doc/performance.md``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark.llama_defaults import Grid, Sweep, Workload, build_grid, run_sweep, write_outputs  # noqa: E402
from xinference.engines.llama_cpp.config import ALL_LAYERS  # noqa: E402  (the platform's "every layer", as -1)

__all__ = ["GPU_GRID", "GPU_WORKLOAD", "build_sweep", "main", "parse_args"]

GPU_GRID = Grid(n_parallels=(4, 8, 16), base_parallel=8, batches=((4096, 1024), (512, 256)), cache_reuse=256)
GPU_WORKLOAD = Workload(max_tokens=128, sessions_c1=4, sessions_per_user_c4=2, concurrency=(1, 4, 16))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="llama.cpp defaults sweep on an NVIDIA GPU (all layers offloaded).")
    parser.add_argument("model", type=Path, help="a 1-3B GGUF file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=GPU_WORKLOAD.max_tokens)
    parser.add_argument("--n-ctx", type=int, default=32768, help="shared by the slots (per-slot: divided)")
    parser.add_argument("--threads", type=int, default=4, help="CPU threads (the GPU does the work)")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--md-out", type=Path, default=None)
    return parser.parse_args(argv)


def build_sweep(args: argparse.Namespace) -> Sweep:
    """The GPU sweep for ``args``: a model file that is not there is refused before any server starts."""
    if not args.model.is_file():
        raise SystemExit(f"{args.model} is not a file: give the path of a GGUF")
    if args.model.suffix != ".gguf":
        raise SystemExit(f"{args.model} is not a .gguf file")
    workload = Workload(
        max_tokens=args.max_tokens,
        sessions_c1=GPU_WORKLOAD.sessions_c1,
        sessions_per_user_c4=GPU_WORKLOAD.sessions_per_user_c4,
        concurrency=GPU_WORKLOAD.concurrency,
    )
    return Sweep(
        build_grid(GPU_GRID),
        workload,
        rounds=args.rounds,
        n_ctx=args.n_ctx,
        threads=args.threads,
        n_gpu_layers=ALL_LAYERS,
        model=args.model,
        baseline="unified np=8",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run_sweep(build_sweep(args), on_round=lambda so_far: write_outputs(so_far, args.json_out, args.md_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
