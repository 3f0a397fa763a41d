"""Batched prefill, A/B in one process: what prefilling waiting prompts together (Transformers) and reusing a
finished request's prompt prefix (MLX) save, measured as CPU time so that a busy machine does not blur it.

The engine's scheduler runs in this process on SmolLM2-135M (:mod:`benchmark._weights`) with one compute thread;
each round alternates the two variants (which goes first swaps every round), and the figures are medians over
rounds of the process's CPU time:

- ``burst``: ``--concurrency`` chat prompts submitted at once, until every one has its first token;
- ``closed``: ``--concurrency`` clients in a closed loop, two requests each of ``--max-tokens`` tokens (EOS
  ignored), reported as output tokens per CPU second, and for Transformers its ratio to one client (the c=8/c=1
  figure of ``bench_batching``, without HTTP).

Variant A is the old path: Transformers prefills each prompt alone (``Sequence.alone``); MLX runs without its
prompt cache (``prompt_cache_size=0``). Variant B is the new one. MLX needs its env's Python::

    python -m benchmark.bench_prefill --engine transformers --rounds 5
    ~/.cache/xinference/envs/mlx/bin/python -m benchmark.bench_prefill --engine mlx --rounds 5
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/bench_prefill.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark._weights import CONVERTED_SMOLLM2
from benchmark.bench_serving import build_prompts

__all__ = ["main", "run_ab"]


class _Sink:
    """Signals the end of a sequence; the scheduler calls it on its thread."""

    cancelled = False

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.error: Any = None

    def on_text(self, seq: Any, text: str) -> None:
        pass

    def on_finish(self, seq: Any, reason: str) -> None:
        self.ended.set()

    def on_error(self, seq: Any, error: Any) -> None:
        self.error = error
        self.ended.set()


def _transformers(path: Path) -> tuple[Any, Any, Callable[[list[int], Any, Any, bool], Any]]:
    """One scheduler for both variants (A marks each sequence ``alone``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xinference.engines.transformers.batching import Scheduler, Sequence

    def loader() -> tuple[Any, Any]:
        torch.set_num_threads(1)
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
        return model.eval(), tok

    scheduler = Scheduler(loader, max_num_seqs=16, device="cpu", name="bench-prefill")
    scheduler.start()
    scheduler.wait_loaded()

    def make(ids: list[int], params: Any, sink: Any, new: bool) -> Any:
        return Sequence(ids, params, sink, alone=not new)

    return {False: scheduler, True: scheduler}, scheduler.tokenizer, make


def _mlx(path: Path) -> tuple[Any, Any, Callable[[list[int], Any, Any, bool], Any]]:
    """Two schedulers (A without the prompt cache, B with it)."""
    from xinference.engines.mlx.runtime import load_model, preload_openblas

    preload_openblas(1)
    from xinference.engines.mlx.scheduler import Scheduler, Sequence

    def loader() -> tuple[Any, Any]:
        model, tok, _ = load_model(str(path), trust_remote_code=False)
        return model, tok

    schedulers = {}
    for new in (False, True):
        scheduler = Scheduler(loader, max_num_seqs=16, prefill_step_size=512, prompt_cache_size=10 if new else 0)
        scheduler.start()
        scheduler.wait_loaded()
        schedulers[new] = scheduler

    def make(ids: list[int], params: Any, sink: Any, new: bool) -> Any:
        return Sequence(ids, params, sink)

    return schedulers, schedulers[False].tokenizer, make


def run_ab(engine: str, rounds: int, concurrency: int, max_tokens: int) -> dict[str, Any]:
    """Median CPU figures of both variants; see the module docstring."""
    from xinference.engines.continuous.requests import SamplingParams

    schedulers, tok, make = (_transformers if engine == "transformers" else _mlx)(CONVERTED_SMOLLM2)
    rng = random.Random(0)

    def encode(text: str) -> list[int]:
        rendered = tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return list(tok.encode(rendered, add_special_tokens=False))

    def burst(new: bool) -> float:
        prompts = build_prompts(concurrency, rng.randrange(1 << 30))
        sinks = [_Sink() for _ in prompts]
        seqs = [
            make(encode(p), SamplingParams(max_tokens=1, temperature=0), s, new)
            for p, s in zip(prompts, sinks, strict=True)
        ]
        start = time.process_time()
        for seq in seqs:
            schedulers[new].submit(seq)
        for sink in sinks:
            sink.ended.wait()
        return time.process_time() - start

    def closed(new: bool, clients: int) -> float:
        prompts = [encode(p) for p in build_prompts(2 * clients, rng.randrange(1 << 30))]
        lock = threading.Lock()

        def client() -> None:
            while True:
                with lock:
                    if not prompts:
                        return
                    ids = prompts.pop()
                sink = _Sink()
                schedulers[new].submit(make(ids, SamplingParams(max_tokens=max_tokens, temperature=0), sink, new))
                sink.ended.wait()

        start = time.process_time()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return 2 * clients * max_tokens / (time.process_time() - start)

    for new in (False, True):  # warm-up, unmeasured
        burst(new)
    figures: dict[str, list[float]] = {}
    for r in range(rounds):
        for new in (False, True) if r % 2 == 0 else (True, False):
            side = "new" if new else "old"
            figures.setdefault(f"{side}_burst_cpu_ms", []).append(burst(new) * 1e3)
            figures.setdefault(f"{side}_closed_tok_per_cpu_s", []).append(closed(new, concurrency))
            if engine == "transformers":
                figures.setdefault(f"{side}_c1_tok_per_cpu_s", []).append(closed(new, 1))
    for scheduler in set(schedulers.values()):
        scheduler.stop()
    result: dict[str, Any] = {"engine": engine, "rounds": rounds, "concurrency": concurrency}
    for key, values in figures.items():
        result[key] = sorted(values)[len(values) // 2]
    if engine == "transformers":
        for side in ("old", "new"):
            result[f"{side}_ratio_c{concurrency}_c1"] = (
                result[f"{side}_closed_tok_per_cpu_s"] / result[f"{side}_c1_tok_per_cpu_s"]
            )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("transformers", "mlx"), default="transformers")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run_ab(args.engine, args.rounds, args.concurrency, args.max_tokens)
    for key, value in result.items():
        print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
