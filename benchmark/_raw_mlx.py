"""The raw MLX baseline: mlx-lm's own OpenAI server (``python -m mlx_lm.server``), set up as the platform's engine.

The platform runs mlx-lm inside its model process with a few fixes (:mod:`xinference.engines.mlx.runtime`); the raw
server gets the same ones, from outside, so that both sides run the same computation:

- the rope settings transformers 5 nests under ``rope_parameters`` are lifted to the top level of ``config.json``
  (the platform passes them to ``mlx_lm.load``; the server cannot), in a copy of the model folder whose other files
  are links to the originals (:func:`patched_model_dir`);
- the system's OpenBLAS is preloaded with the platform's thread count (``LD_PRELOAD`` and
  ``OPENBLAS_NUM_THREADS``) instead of the wheel's reference BLAS (:func:`server_env`);
- decode and prefill batch sizes, the prefill step and the number of finished requests' KV caches kept for prefix
  reuse are the platform's resolved ones (:func:`server_command`).

``mlx_lm.server`` has no ``ignore_eos``; requests to it carry a ``logit_bias`` that bans the end-of-sequence
tokens instead (:func:`eos_bias`), so both sides generate exactly ``max_tokens``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["eos_bias", "eos_token_ids", "patched_model_dir", "server_command", "server_env"]

#: The bias that bans a token for greedy decoding: the lowest value OpenAI's ``logit_bias`` allows.
BANNED = -100.0
#: the platform's prefill batch is at most this many prompts (``xinference.engines.mlx.scheduler``)
MAX_PREFILL_BATCH = 8


def server_command(
    python: str | Path,
    model_dir: Path,
    port: int,
    *,
    max_num_seqs: int,
    prefill_step_size: int,
    prompt_cache_size: int | None = None,
) -> list[str]:
    """``mlx_lm.server`` serving ``model_dir`` on loopback ``port`` with the platform's batch settings."""
    return [
        str(python),
        "-m",
        "mlx_lm.server",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--decode-concurrency",
        str(max_num_seqs),
        "--prompt-concurrency",
        str(min(max_num_seqs, MAX_PREFILL_BATCH)),
        "--prefill-step-size",
        str(prefill_step_size),
        *(["--prompt-cache-size", str(prompt_cache_size)] if prompt_cache_size is not None else []),
        "--log-level",
        "WARNING",
    ]


def server_env(threads: int, openblas: Path | None) -> dict[str, str]:
    """OpenBLAS preloaded with ``threads`` threads, as the platform's model process does; nothing without it."""
    if openblas is None:
        return {"HF_HUB_OFFLINE": "1"}
    return {"LD_PRELOAD": str(openblas), "OPENBLAS_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}


def patched_model_dir(source: Path, target: Path, overrides: dict[str, Any]) -> Path:
    """``source`` seen through ``target``: every file linked, ``config.json`` rewritten with ``overrides`` on top.

    Without overrides ``source`` itself is returned (nothing to fix).
    """
    if not overrides:
        return source
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name != "config.json" and not (target / entry.name).exists():
            os.symlink(entry.resolve(), target / entry.name)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    (target / "config.json").write_text(json.dumps({**config, **overrides}, indent=2), encoding="utf-8")
    return target


def eos_token_ids(model_dir: Path) -> list[int]:
    """Every id the model may end a sequence with: ``eos_token_id`` of config.json and generation_config.json and
    the tokenizer's ``eos_token`` (looked up in tokenizer.json's added tokens)."""
    found: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        found.update(_ids(_read_json(model_dir / name).get("eos_token_id")))
    eos_text = _read_json(model_dir / "tokenizer_config.json").get("eos_token")
    if isinstance(eos_text, dict):
        eos_text = eos_text.get("content")
    for token in _read_json(model_dir / "tokenizer.json").get("added_tokens", []):
        if token.get("content") == eos_text and isinstance(token.get("id"), int):
            found.add(token["id"])
    return sorted(found)


def eos_bias(ids: Iterable[int]) -> dict[str, Any]:
    """The request fields that stand in for ``ignore_eos`` on ``mlx_lm.server``."""
    return {"logit_bias": {str(i): BANNED for i in sorted(set(ids))}}


def _ids(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    return []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
