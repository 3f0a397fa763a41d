"""Loading a model with mlx-lm: the fixes its loader needs on this platform, then ``mlx_lm.load``.

Two traps, both measured on Linux x86_64 with ``mlx[cpu]`` 0.32 and mlx-lm 0.32:

- **rope_theta.** Configs written by transformers 5 keep ``rope_theta`` (and the scaling fields) inside
  ``rope_parameters``; mlx-lm reads the top-level key, silently falls back to its default base and the model
  writes garbage. :func:`config_overrides` lifts them back to the top level, passed as ``model_config`` to
  ``load`` (the files on disk are never rewritten).
- **BLAS.** The ``mlx[cpu]`` wheel ships the reference BLAS: SmolLM2-135M decodes at 8.7 tok/s and takes 3.3 s to
  a first token. With Debian's OpenBLAS (``apt-get install libopenblas0-pthread``) loaded first it does 15 tok/s
  and 0.25 s. :func:`preload_openblas` opens OpenBLAS with ``RTLD_GLOBAL`` *before* ``mlx.core`` is imported:
  symbols already in the global scope win over the wheel's own ``libblas`` when ``libmlx.so`` is bound, which is
  what ``LD_PRELOAD`` would do, without needing the worker to set the variable before the process starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

__all__ = ["config_overrides", "find_openblas", "load_model", "preload_openblas"]

logger = logging.getLogger(__name__)

#: Where Debian/Ubuntu's ``libopenblas0-pthread`` puts the library, per multiarch triplet.
_OPENBLAS_DIRS = ("/usr/lib/{triplet}/openblas-pthread", "/usr/lib/{triplet}")
_TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "arm64": "aarch64-linux-gnu"}
#: Scaling fields transformers 5 moved under ``rope_parameters`` that mlx-lm reads from ``rope_scaling``.
_SCALING_TYPES_IGNORED = (None, "default")
#: the OpenBLAS this process loaded before mlx (a second model in the same process finds it here)
_preloaded: Path | None = None


def config_overrides(model_path: str | Path) -> dict[str, Any]:
    """What to pass as ``model_config`` to ``mlx_lm.load`` so it reads this folder's rope settings.

    Empty for configs mlx-lm already understands (``rope_theta`` at the top level) and for layouts it has its own
    handling for (per-layer-type ``rope_parameters``).
    """
    try:
        config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    sources = [config]
    text_config = config.get("text_config")
    if isinstance(text_config, dict):
        sources.append(text_config)  # multimodal wrappers keep the language model's fields here
    overrides: dict[str, Any] = {}
    for source in sources:
        nested = source.get("rope_parameters")
        if not isinstance(nested, dict) or "rope_theta" in source:
            continue
        theta = nested.get("rope_theta")
        if not isinstance(theta, (int, float)):
            continue
        overrides["rope_theta"] = float(theta)
        kind = nested.get("rope_type", nested.get("type"))
        if kind not in _SCALING_TYPES_IGNORED and not source.get("rope_scaling"):
            overrides["rope_scaling"] = {k: v for k, v in nested.items() if k != "rope_theta"}
        break
    return overrides


def find_openblas() -> Path | None:
    """The system's pthread OpenBLAS on Linux, or None (not installed, or not Linux)."""
    if sys.platform != "linux":
        return None
    triplet = _TRIPLETS.get(platform.machine().lower())
    if triplet is not None:
        for folder in _OPENBLAS_DIRS:
            candidate = Path(folder.format(triplet=triplet)) / "libopenblas.so.0"
            if candidate.is_file():
                return candidate
    found = ctypes.util.find_library("openblas")
    return Path(found) if found else None


def preload_openblas(threads: int) -> Path | None:
    """Load OpenBLAS into the global symbol scope before mlx and give it ``threads`` threads; returns its path, or
    None when mlx keeps its own BLAS.

    Already preloaded (``LD_PRELOAD``, see ``MLXEngine.process_env``): only the thread count is set. Otherwise it
    must run before the first ``import mlx.core`` in this process; later it would change nothing, so it declines.
    """
    global _preloaded
    path = find_openblas()
    if path is None:
        return None
    preloaded = path == _preloaded or str(path) in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
    if not preloaded and "mlx.core" in sys.modules:
        logger.warning("mlx is already imported in this process; OpenBLAS at %s cannot take over its BLAS", path)
        return None
    try:
        library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        logger.warning("could not load OpenBLAS from %s (%s); mlx keeps its reference BLAS", path, exc)
        return None
    set_threads = getattr(library, "openblas_set_num_threads", None)
    if set_threads is not None:
        set_threads(ctypes.c_int(threads))
    _preloaded = path
    return path


def load_model(model_path: str, *, trust_remote_code: bool) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, overrides)`` from a local folder of HF safetensors or mlx-format weights."""
    from mlx_lm import load

    overrides = config_overrides(model_path)
    model, tokenizer = load(model_path, model_config=overrides, trust_remote_code=trust_remote_code)
    return model, tokenizer, overrides
