"""Every ``XINFERENCE_*`` environment variable, read in one place.

Values are read when the functions are called (not at import), so tests and subprocesses that set the
environment late still see their values.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "api_keys",
    "cache_dir",
    "endpoint",
    "envs_dir",
    "heartbeat_interval",
    "home_dir",
    "llama_cpp_index_url",
    "logs_dir",
    "model_logs_dir",
    "model_restart_limit",
    "model_src",
    "responses_store_limits",
    "stream_interval",
    "worker_timeout",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9997
DEFAULT_ENDPOINT = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def home_dir() -> Path:
    """``XINFERENCE_HOME`` (default ``~/.xinference``): state, logs and the model cache live under it."""
    raw = os.environ.get("XINFERENCE_HOME") or os.path.join(os.path.expanduser("~"), ".xinference")
    path = Path(raw).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir() -> Path:
    """Where the platform's own processes write their logs."""
    path = home_dir() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_logs_dir() -> Path:
    """Where each model subprocess writes its log (engine output included), one file per replica."""
    path = logs_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Downloaded weights: ``XINFERENCE_HOME/cache/<hub>/<org>--<repo>/<revision>/``."""
    path = home_dir() / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def envs_dir() -> Path:
    """``XINFERENCE_ENVS_DIR`` (default ``XINFERENCE_HOME/envs``): one virtualenv per engine that needs packages of
    its own (``xinference engine install NAME``). Several homes may share one folder: an env does not depend on the
    home that created it."""
    raw = os.environ.get("XINFERENCE_ENVS_DIR")
    path = Path(raw).expanduser().resolve() if raw else home_dir() / "envs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def llama_cpp_index_url() -> str | None:
    """``XINFERENCE_LLAMA_CPP_INDEX_URL``: a package index serving GPU builds of xllamacpp (PyPI has CPU builds
    only). When set, ``xinference engine install llama.cpp`` on a CUDA worker installs that build into llama.cpp's
    own environment and its models run from it; unset, llama.cpp runs from the main environment."""
    value = os.environ.get("XINFERENCE_LLAMA_CPP_INDEX_URL", "").strip()
    return value or None


def model_src() -> str | None:
    """``XINFERENCE_MODEL_SRC``: the hub to download from when a launch names none (``huggingface``,
    ``modelscope``); ``None`` when unset."""
    value = os.environ.get("XINFERENCE_MODEL_SRC", "").strip().lower()
    return value or None


def endpoint() -> str:
    """``XINFERENCE_ENDPOINT``: the API the CLI talks to."""
    return os.environ.get("XINFERENCE_ENDPOINT") or DEFAULT_ENDPOINT


def api_keys() -> frozenset[str]:
    """``XINFERENCE_API_KEYS``: comma-separated keys; when set, every route needs ``Authorization: Bearer KEY``."""
    raw = os.environ.get("XINFERENCE_API_KEYS", "")
    return frozenset(key.strip() for key in raw.split(",") if key.strip())


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def heartbeat_interval() -> float:
    """``XINFERENCE_HEARTBEAT_INTERVAL``: seconds between a worker's heartbeats (default 3)."""
    return _seconds("XINFERENCE_HEARTBEAT_INTERVAL", 3.0)


def worker_timeout() -> float:
    """``XINFERENCE_WORKER_TIMEOUT``: a worker silent this long is declared dead (default 12 s, so it leaves the
    routes within ~15 s)."""
    return _seconds("XINFERENCE_WORKER_TIMEOUT", 12.0)


def model_restart_limit() -> int:
    """``XINFERENCE_MODEL_RESTARTS``: how many times a worker restarts a replica whose process died (default 3)."""
    try:
        return max(0, int(os.environ.get("XINFERENCE_MODEL_RESTARTS", "3")))
    except ValueError:
        return 3


def responses_store_limits() -> tuple[int, float]:
    """``XINFERENCE_RESPONSES_MAX`` (default 1000) and ``XINFERENCE_RESPONSES_TTL`` (seconds, default 3600): how many
    ``/v1/responses`` results the API keeps in memory for ``previous_response_id``, and for how long."""
    try:
        count = max(0, int(os.environ.get("XINFERENCE_RESPONSES_MAX", "1000")))
    except ValueError:
        count = 1000
    return count, _seconds("XINFERENCE_RESPONSES_TTL", 3600.0)


def stream_interval() -> float:
    """``XINFERENCE_STREAM_INTERVAL_MS``: streamed tokens are handed from the model process to the API at most this
    often (default 40 ms, i.e. 25 updates a second; 0: every token). The first chunk is never held back. Every
    hand-over is a cross-process message costing ~1 ms of CPU on a small machine, which one token every few ms
    cannot afford."""
    try:
        value = float(os.environ.get("XINFERENCE_STREAM_INTERVAL_MS", "40"))
    except ValueError:
        value = 40.0
    return max(0.0, value) / 1000.0
