"""The raw-engine baseline: llama.cpp's own OpenAI HTTP server, opened by ``xllamacpp.Server``, nothing else.

Run as a helper process by the benchmarks::

    python -m benchmark._raw_server --model FILE.gguf --n-ctx 8192 --n-parallel 4 --threads 2 --log raw.log

Parameters are set the way the platform's llama.cpp engine sets them (``LlamaCppEngine._build_params``), minus
the API key, so that the only difference between the two sides is the platform itself. Once the engine serves,
one line ``RAW_SERVER_READY {"address": ..., "load_seconds": ..., ...}`` is printed on stdout (llama.cpp's own
output goes to ``--log``); then it serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

READY_MARKER = "RAW_SERVER_READY "
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Serve a GGUF with llama.cpp's own server (benchmark baseline).")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--n-parallel", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--threads-batch", type=int, default=None, help="default: --threads")
    parser.add_argument("--no-kv-unified", dest="kv_unified", action="store_false")
    parser.add_argument("--flash-attn", choices=sorted(FLASH_ATTN), default="auto")
    parser.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false")
    parser.add_argument("--n-gpu-layers", type=int, default=0)
    # left unset: llama.cpp's own defaults (benchmark.llama_defaults sweeps them)
    parser.add_argument("--n-batch", type=int, default=None)
    parser.add_argument("--n-ubatch", type=int, default=None)
    parser.add_argument("--cache-reuse", type=int, default=None, help="llama.cpp's n_cache_reuse (chunk size)")
    parser.add_argument("--cache-ram", type=int, default=None, help="llama.cpp's cache_ram_mib (0: off)")
    parser.add_argument("--log", default=None, help="where llama.cpp's output goes (default: discarded)")
    return parser.parse_args(argv)


def build_params(xllamacpp: Any, args: argparse.Namespace) -> Any:
    """``CommonParams`` with the same fields the platform's engine sets; no API key, loopback, any free port."""
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.n_ctx
    params.n_parallel = args.n_parallel
    params.kv_unified = args.kv_unified
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads_batch or args.threads
    params.n_gpu_layers = args.n_gpu_layers
    params.cache_prompt = args.cache_prompt
    params.flash_attn_type = FLASH_ATTN[args.flash_attn]
    for field, value in (
        ("n_batch", args.n_batch),
        ("n_ubatch", args.n_ubatch),
        ("n_cache_reuse", args.cache_reuse),
        ("cache_ram_mib", args.cache_ram),
    ):
        if value is not None:
            setattr(params, field, value)
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.endpoint_metrics = False
    params.endpoint_slots = False
    params.endpoint_props = False
    return params


def _redirect_output(path: str | None) -> int:
    """Point fds 1 and 2 (llama.cpp's C++ logging included) at ``path``; returns a private copy of stdout."""
    ready_fd = os.dup(1)
    target = os.open(path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    return ready_fd


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ready_fd = _redirect_output(args.log)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    started = time.perf_counter()
    import xllamacpp

    imported = time.perf_counter()
    server = xllamacpp.Server(build_params(xllamacpp, args))
    loaded = time.perf_counter()
    info = {
        "address": server.listening_address,
        "load_seconds": loaded - imported,
        "import_seconds": imported - started,
        "pid": os.getpid(),
        "xllamacpp": getattr(xllamacpp, "__version__", "unknown"),
    }
    os.write(ready_fd, (READY_MARKER + json.dumps(info) + "\n").encode())
    os.close(ready_fd)
    while not stop.wait(0.5):
        pass
    del server  # stops llama.cpp's loop and HTTP threads before the interpreter exits
    return 0


if __name__ == "__main__":
    sys.exit(main())
