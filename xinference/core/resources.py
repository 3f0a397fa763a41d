"""What a worker's machine and its model processes use right now (CPU, memory, GPU busy), for ``/metrics``.

Read with psutil when the supervisor's metrics ask (at scrape time, never on the request path). A replica's
figures include its children: a managed engine (vLLM, SGLang) runs its server as a child of the model process.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psutil

__all__ = ["machine_usage"]

logger = logging.getLogger(__name__)


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
    """Each NVIDIA GPU's busy fraction through NVML (``nvidia-ml-py``); empty without it."""
    try:
        import pynvml
    except ImportError:
        return []
    out: list[dict[str, Any]] = []
    try:
        pynvml.nvmlInit()
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            out.append({"index": index, "name": name.decode() if isinstance(name, bytes) else str(name),
                        "utilization": float(rates.gpu) / 100.0})
    except Exception as exc:  # noqa: BLE001 - NVML errors only lose this gauge
        logger.debug("NVML utilization unavailable: %s", exc)
    return out


def machine_usage(replicas: dict[str, tuple[str, int | None]]) -> dict[str, Any]:
    """CPU use of the machine since the previous call (0-1), and each replica's process tree: ``replicas`` maps
    a replica uid to (model uid, pid)."""
    report: dict[str, Any] = {"cpu_utilization": psutil.cpu_percent(interval=None) / 100.0,
                              "gpus": _gpu_utilization(), "replicas": {}}
    for replica_uid, (model_uid, pid) in replicas.items():
        if pid is None:
            continue
        cpu, rss = _process_tree(pid)
        report["replicas"][replica_uid] = {"model_uid": model_uid, "pid": pid, "cpu_seconds": round(cpu, 3),
                                           "rss_bytes": rss}
    return report
