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
    "endpoint",
    "home_dir",
    "logs_dir",
    "model_logs_dir",
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


def endpoint() -> str:
    """``XINFERENCE_ENDPOINT``: the API the CLI talks to."""
    return os.environ.get("XINFERENCE_ENDPOINT") or DEFAULT_ENDPOINT


def api_keys() -> frozenset[str]:
    """``XINFERENCE_API_KEYS``: comma-separated keys; when set, every route needs ``Authorization: Bearer KEY``."""
    raw = os.environ.get("XINFERENCE_API_KEYS", "")
    return frozenset(key.strip() for key in raw.split(",") if key.strip())
