"""What a worker's machine and its model processes use right now (CPU, memory, GPU busy), for ``/metrics``.

Read with psutil when the supervisor's metrics ask (at scrape time, never on the request path). A replica's
figures include its children: a managed engine (vLLM, SGLang) runs its server as a child of the model process.
GPU busy comes from the hardware probe (:func:`xinference.hardware.nvidia.detect_nvidia_utilization`: NVML,
else ``nvidia-smi`` at most once per its refresh period).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import psutil

from xinference.hardware.nvidia import detect_nvidia_utilization

__all__ = ["machine_usage"]


def _process_tree(pid: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of ``pid`` and its descendants; zeros when it is gone."""
    cpu, rss = 0.0, 0
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return cpu, rss
    for proc in members:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            cpu += times.user + times.system
            rss += proc.memory_info().rss
    return cpu, rss


def _gpu_utilization() -> list[dict[str, Any]]:
    """Each NVIDIA GPU's busy fraction, numbered like the worker's GPUs in its heartbeat: through NVML when
    ``nvidia-ml-py`` is installed, else from ``nvidia-smi``'s kept answer (no extra run of the binary); empty on a
    machine without either."""
    return [dataclasses.asdict(gpu) for gpu in detect_nvidia_utilization()]


def machine_usage(replicas: dict[str, tuple[str, int | None]]) -> dict[str, Any]:
    """CPU use of the machine since the previous call (0-1), and each replica's process tree: ``replicas`` maps
    a replica uid to (model uid, pid)."""
    report: dict[str, Any] = {
        "cpu_utilization": psutil.cpu_percent(interval=None) / 100.0,
        "gpus": _gpu_utilization(),
        "replicas": {},
    }
    for replica_uid, (model_uid, pid) in replicas.items():
        if pid is None:
            continue
        cpu, rss = _process_tree(pid)
        report["replicas"][replica_uid] = {
            "model_uid": model_uid,
            "pid": pid,
            "cpu_seconds": round(cpu, 3),
            "rss_bytes": rss,
        }
    return report
