"""What the audio benchmarks (``compare_tts``, ``compare_stt``) share: launching an audio model on a running
platform, medians over rounds, and the machine and package versions a result is reported with."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform as host
import statistics
from collections.abc import Sequence
from typing import Any

import httpx

__all__ = ["launch_audio", "machine_conditions", "summarize", "versions"]


def launch_audio(api: str, model_name: str, uid: str, **options: Any) -> None:
    """``POST /v1/models`` for the audio model ``model_name`` as ``uid`` (extra launch options as given); raises
    with the server's answer when the launch fails."""
    body = {"model_name": model_name, "model_type": "audio", "model_uid": uid, **options}
    response = httpx.post(f"{api}/models", json=body, timeout=180)
    if response.status_code != 200:
        raise RuntimeError(f"launch of {model_name} failed: HTTP {response.status_code} {response.text[:300]}")


def summarize(rounds: list[dict[str, dict[str, dict[str, Any]]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Medians over rounds: ``{side: {level: {metric: value}}}`` (numeric metrics only)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for side in rounds[0]:
        out[side] = {}
        for level in rounds[0][side]:
            metrics = rounds[0][side][level]
            out[side][level] = {
                key: statistics.median(r[side][level][key] for r in rounds)
                for key in metrics
                if isinstance(metrics[key], (int, float)) and not isinstance(metrics[key], bool)
            }
    return out


def versions(dists: Sequence[str]) -> dict[str, str]:
    """The installed version of each distribution, ``missing`` when absent."""
    found = {}
    for dist in dists:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "missing"
    return found


def machine_conditions() -> dict[str, str]:
    """The date and a one-line description of this machine (usable cores: this process's CPU affinity)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{host.system()} {host.machine()}, {cores} usable cores, Python {host.python_version()}",
    }
