"""GPU busy fraction for ``xinference:worker_gpu_utilization`` (``core/resources.machine_usage``): through NVML when
``pynvml`` is importable, else from the ``utilization.gpu`` column of the ``nvidia-smi`` answer the hardware probe
keeps (one run of the binary serves heartbeats and scrapes alike).

This machine has no GPU: the ``nvidia-smi`` path runs a clearly named stand-in script printing canned CSV (the
helpers of ``test_hardware``), and the NVML path a stand-in ``pynvml`` module that counts its calls.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hardware.test_hardware import (
    CANNED_CSV,
    FakeNvml,
    _canned_csv_body,
    _counting_fake_nvidia_smi_body,
    _install_fake_nvidia_smi,
    needs_fake_nvidia_smi,
)
from xinference.core.resources import machine_usage
from xinference.hardware import detect_hardware, reset_nvidia_probe
from xinference.hardware import nvidia as nvidia_probe
from xinference.hardware.nvidia import GpuUtilization, detect_nvidia_utilization, parse_nvidia_smi_utilization


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    reset_nvidia_probe()
    yield
    reset_nvidia_probe()


def test_parse_utilization_column() -> None:
    assert parse_nvidia_smi_utilization(CANNED_CSV) == {0: 0.37, 1: 1.0}


def test_parse_utilization_skips_what_the_driver_does_not_report() -> None:
    text = (
        "0, Tesla T4, 15360, 15000, GPU-cccc, 550.54.15, [N/A]\n"
        "1, NVIDIA GB10, [N/A], [N/A], [N/A], 580.95, [Not Supported]\n"
        "2, NVIDIA L4, 23034, 20000, GPU-dddd, 550.54.15, 12 %\n"
        "3, NVIDIA L4, 23034, 20000, GPU-eeee, 550.54.15, 250\n"  # not a percentage
        "4, NVIDIA L4, 23034, 20000, GPU-ffff, 550.54.15\n"  # an answer without the column
        "x, NVIDIA L4, 1, 1, GPU-gggg, 550.54.15, 5\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    )
    assert parse_nvidia_smi_utilization(text) == {2: 0.12}
    assert parse_nvidia_smi_utilization("") == {}


@needs_fake_nvidia_smi
def test_metrics_read_utilization_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _canned_csv_body())
    assert machine_usage({})["gpus"] == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "utilization": 0.37},
        {"index": 1, "name": "NVIDIA GeForce RTX 4090", "utilization": 1.0},
    ]


@needs_fake_nvidia_smi
def test_one_nvidia_smi_run_serves_heartbeats_and_scrapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "runs.txt"
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _counting_fake_nvidia_smi_body(counter))
    monkeypatch.setattr(nvidia_probe, "NVIDIA_SMI_REFRESH_S", 3600.0)

    assert len(detect_hardware().gpus) == 2  # the worker's heartbeat
    scrapes = [machine_usage({})["gpus"] for _ in range(3)]

    assert counter.read_text().splitlines() == ["run"]
    assert all(len(gpus) == 2 for gpus in scrapes)
    # Numbered like the heartbeat's GPUs (the memory gauges' labels): CUDA_VISIBLE_DEVICES applies.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert detect_nvidia_utilization() == (GpuUtilization(0, "NVIDIA GeForce RTX 4090", 1.0),)
    assert len(counter.read_text().splitlines()) == 1


@needs_fake_nvidia_smi
def test_failing_nvidia_smi_means_no_gpu_gauge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_nvidia_smi(tmp_path, monkeypatch, "exit 9")
    assert machine_usage({})["gpus"] == []


class BusyFakeNvml(FakeNvml):
    """The STAND-IN ``pynvml`` of ``test_hardware``, which also answers utilization (GPU 1 does not support it)."""

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:  # noqa: N802 - NVML's spelling
        self._count("utilization")
        if handle == 1:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return types.SimpleNamespace(gpu=64, memory=10)


@pytest.mark.skipif(sys.platform == "darwin", reason="Apple silicon reports its own GPU, not NVIDIA's")
def test_metrics_read_utilization_through_the_kept_nvml_session(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = BusyFakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    detect_hardware()
    detect_hardware()
    assert "utilization" not in fake.calls  # heartbeats read memory only
    assert machine_usage({})["gpus"] == [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "utilization": 0.64}]
    machine_usage({})

    assert fake.calls["init"] == 1  # one session for heartbeats and scrapes
    assert fake.calls["utilization"] == 2 * 2
