"""GPUs through a real ``xinference-local`` on a machine without NVML: ``GET /v1/cluster/devices``, the ``devices``
of ``GET /v1/cluster/info`` and the GPU gauges of ``GET /metrics`` (memory, and utilisation from ``nvidia-smi``'s
``utilization.gpu``, the fallback when ``nvidia-ml-py`` is not installed).

This machine has no GPU, so the server's ``PATH`` starts with a clearly named stand-in ``nvidia-smi`` script that
prints canned CSV for a made-up two-GPU machine (``test_hardware``'s); everything else is the real server.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from tests.api.test_metrics import scrape, value
from tests.conftest import start_local_server
from tests.hardware.test_hardware import MIB, _canned_csv_body, needs_fake_nvidia_smi

pytestmark = pytest.mark.slow

A100, RTX = "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"


@needs_fake_nvidia_smi
def test_devices_and_gpu_gauges_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "fake_nvidia_smi_bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n# FAKE nvidia-smi: a test stand-in printing canned output, not NVIDIA's tool.\n"
        f"{_canned_csv_body()}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    server = start_local_server(home, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"})
    try:
        devices = httpx.get(f"{server.api}/cluster/devices", timeout=30)
        assert devices.status_code == 200, devices.text
        listed = [
            (d["index"], d["name"], d["vendor"], d["memory_total_bytes"], d["memory_used_bytes"], d["models"])
            for d in devices.json()
        ]
        assert listed == [
            (0, A100, "nvidia", 81920 * MIB, 1920 * MIB, []),
            (1, RTX, "nvidia", 24564 * MIB, 23540 * MIB, []),
        ]
        info = httpx.get(f"{server.api}/cluster/info", timeout=30).json()
        assert info["devices"] == devices.json()
        worker = devices.json()[0]["worker"]

        page = scrape(server.endpoint)
        assert value(page, "xinference:worker_gpu_utilization", worker=worker, gpu="0", gpu_name=A100) == 0.37
        assert value(page, "xinference:worker_gpu_utilization", worker=worker, gpu="1", gpu_name=RTX) == 1.0
        assert value(page, "xinference:worker_gpu_memory_total_bytes", worker=worker, gpu="1") == 24564 * MIB
        assert value(page, "xinference:worker_gpu_memory_used_bytes", worker=worker, gpu="0") == 1920 * MIB
    finally:
        server.stop()
