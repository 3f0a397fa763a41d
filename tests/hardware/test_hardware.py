"""Tests for per-worker hardware detection (xinference.hardware).

This machine has no GPU, so the ``nvidia-smi`` subprocess path is exercised end to end with a clearly named
stand-in: a tiny shell script placed on ``PATH`` from a ``fake_nvidia_smi_bin`` tmp directory that prints
canned CSV, and the NVML path with a stand-in ``pynvml`` module that counts its calls (``FakeNvml``).
Everything else runs the real detection or the pure parsers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import stat
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from xinference.hardware import (
    GpuInfo,
    HardwareInfo,
    detect_hardware,
    parse_cgroup_cpu_max,
    parse_cuda_visible_devices,
    parse_nvidia_smi_csv,
    reset_nvidia_probe,
)
from xinference.hardware import nvidia as nvidia_probe
from xinference.hardware.host import normalize_arch

MIB = 1024**2
GIB = 1024**3

HAS_PYNVML = importlib.util.find_spec("pynvml") is not None

# Canned output of `nvidia-smi --query-gpu=index,name,memory.total,memory.free,uuid,driver_version,utilization.gpu
# --format=csv,noheader,nounits` on a made-up two-GPU machine (memory in MiB, utilization in percent).
NVIDIA_SMI_QUERY = "index,name,memory.total,memory.free,uuid,driver_version,utilization.gpu"
CANNED_CSV = (
    "0, NVIDIA A100-SXM4-80GB, 81920, 80000, GPU-aaaaaaaa-1111-2222-3333-444444444444, 550.54.15, 37\n"
    "1, NVIDIA GeForce RTX 4090, 24564, 1024, GPU-bbbbbbbb-5555-6666-7777-888888888888, 550.54.15, 100\n"
)


@pytest.fixture(autouse=True)
def _fresh_nvidia_probe() -> Iterator[None]:
    """Each test starts without a kept NVML session or nvidia-smi answer, and leaves none behind."""
    reset_nvidia_probe()
    yield
    reset_nvidia_probe()


def _sample_info() -> HardwareInfo:
    return HardwareInfo(
        os="linux",
        arch="x86_64",
        cpu_count=8,
        ram_total_bytes=64 * GIB,
        ram_free_bytes=40 * GIB,
        gpus=parse_nvidia_smi_csv(CANNED_CSV),
        cuda_available=True,
    )


# ------------------------------------------------------------------------------------- real detection


def test_detect_hardware_on_this_machine() -> None:
    info = detect_hardware()

    assert info.os == platform.system().lower()
    assert info.arch and info.arch == info.arch.lower()
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        assert (info.os, info.arch) == ("linux", "x86_64")
    assert 1 <= info.cpu_count <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert info.cpu_count <= len(os.sched_getaffinity(0))
    assert 0 < info.ram_free_bytes <= info.ram_total_bytes
    assert info.is_apple_silicon == (info.os == "darwin" and info.arch == "arm64")
    assert info.cuda_available == any(gpu.vendor == "nvidia" for gpu in info.gpus)
    indices = [gpu.index for gpu in info.gpus]
    assert indices == sorted(set(indices))  # a GPU the driver cannot query leaves a gap, nothing else does
    if not HAS_PYNVML and shutil.which("nvidia-smi") is None and not info.is_apple_silicon:
        assert info.gpus == ()
        assert not info.cuda_available
    if not info.gpus:
        assert info.summary().endswith("no GPU")
        assert sum(g.memory_free_bytes for g in info.gpus) == 0
    assert f"{info.os} {info.arch}" in info.summary()
    assert "CPU core" in info.summary()


def test_detect_hardware_returns_fresh_snapshots() -> None:
    first, second = detect_hardware(), detect_hardware()
    assert first is not second
    assert (first.os, first.arch, first.cpu_count, first.ram_total_bytes) == (
        second.os,
        second.arch,
        second.cpu_count,
        second.ram_total_bytes,
    )


def test_detected_info_round_trips_through_json() -> None:
    info = detect_hardware()
    data = json.loads(json.dumps(info.model_dump(mode="json")))
    assert HardwareInfo.model_validate(data) == info


# ------------------------------------------------------------------------------------------- models


def test_round_trip_with_gpus_through_json() -> None:
    info = _sample_info()
    data = info.model_dump(mode="json")
    text = json.dumps(data)
    assert isinstance(data["gpus"], list)
    rebuilt = HardwareInfo.model_validate(json.loads(text))
    assert rebuilt == info
    assert rebuilt.gpus[1].uuid == "GPU-bbbbbbbb-5555-6666-7777-888888888888"


def test_models_are_frozen_and_reject_unknown_fields() -> None:
    info = _sample_info()
    with pytest.raises(pydantic.ValidationError):
        info.cpu_count = 1  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        HardwareInfo.model_validate({**info.model_dump(mode="json"), "tpu": True})
    with pytest.raises(pydantic.ValidationError):
        GpuInfo(index=0, name="x", vendor="nvidia", memory_total_bytes=1, memory_free_bytes=1, extra=1)  # type: ignore[call-arg]


def test_cuda_available_is_derived_and_checked() -> None:
    base = {"os": "linux", "arch": "x86_64", "cpu_count": 4, "ram_total_bytes": GIB, "ram_free_bytes": GIB}
    gpu = {
        "index": 0,
        "name": "NVIDIA T4",
        "vendor": "nvidia",
        "memory_total_bytes": 16 * GIB,
        "memory_free_bytes": GIB,
    }

    assert HardwareInfo.model_validate(base).cuda_available is False
    assert HardwareInfo.model_validate({**base, "gpus": [gpu]}).cuda_available is True
    with pytest.raises(pydantic.ValidationError, match="cuda_available"):
        HardwareInfo.model_validate({**base, "gpus": [gpu], "cuda_available": False})
    with pytest.raises(pydantic.ValidationError, match="cuda_available"):
        HardwareInfo.model_validate({**base, "cuda_available": True})
    with pytest.raises(pydantic.ValidationError, match="unique"):
        HardwareInfo.model_validate({**base, "gpus": [gpu, gpu]})


def test_convenience_properties_and_summary() -> None:
    info = _sample_info()
    assert info.cuda_available
    assert sum(g.memory_free_bytes for g in info.gpus) == (80000 + 1024) * MIB
    summary = info.summary()
    assert summary.startswith("linux x86_64, 8 CPU cores, 40.0 GiB RAM free of 64.0 GiB, 2 GPUs: ")
    assert "[0] NVIDIA A100-SXM4-80GB (78.1 GiB free of 80.0 GiB)" in summary
    assert "[1] NVIDIA GeForce RTX 4090 (1.0 GiB free of 24.0 GiB)" in summary

    apple = HardwareInfo(
        os="darwin",
        arch="arm64",
        cpu_count=1,
        ram_total_bytes=16 * GIB,
        ram_free_bytes=8 * GIB,
        is_apple_silicon=True,
        gpus=(
            GpuInfo(index=0, name="Apple M2", vendor="apple", memory_total_bytes=16 * GIB, memory_free_bytes=8 * GIB),
        ),
    )
    assert not apple.cuda_available
    assert apple.summary() == (
        "darwin arm64 (Apple silicon), 1 CPU core, 8.0 GiB RAM free of 16.0 GiB, "
        "1 GPU: [0] Apple M2 (8.0 GiB free of 16.0 GiB)"
    )


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "arm64"), ("arm64", "arm64"), ("ppc64le", "ppc64le")],
)
def test_arch_names_are_normalized(machine: str, expected: str) -> None:
    assert normalize_arch(machine) == expected


# ------------------------------------------------------------------------------------------ parsers


def test_parse_nvidia_smi_csv_two_gpus() -> None:
    gpus = parse_nvidia_smi_csv(CANNED_CSV)
    assert len(gpus) == 2
    first, second = gpus
    assert (first.index, first.physical_index, first.vendor) == (0, 0, "nvidia")
    assert first.name == "NVIDIA A100-SXM4-80GB"
    assert first.memory_total_bytes == 81920 * MIB
    assert first.memory_free_bytes == 80000 * MIB
    assert first.uuid == "GPU-aaaaaaaa-1111-2222-3333-444444444444"
    assert first.driver_version == "550.54.15"
    assert (second.index, second.name, second.memory_total_bytes, second.memory_free_bytes) == (
        1,
        "NVIDIA GeForce RTX 4090",
        24564 * MIB,
        1024 * MIB,
    )


def test_parse_nvidia_smi_csv_tolerates_odd_rows() -> None:
    text = (
        "\n"
        "0, Tesla T4, 15360, 15000, GPU-cccc\n"  # five columns: no driver version
        "1, NVIDIA GB10, [N/A], [N/A], [N/A], 580.95\n"  # unified memory: not reported
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
        "2, short\n"
    )
    gpus = parse_nvidia_smi_csv(text)
    assert [gpu.index for gpu in gpus] == [0, 1]
    assert gpus[0].driver_version is None and gpus[0].uuid == "GPU-cccc"
    assert (gpus[1].memory_total_bytes, gpus[1].memory_free_bytes, gpus[1].uuid) == (0, 0, None)
    assert gpus[1].driver_version == "580.95"
    assert parse_nvidia_smi_csv("") == ()
    assert parse_nvidia_smi_csv("garbage\x00,,,\n") == ()


UUIDS = ("GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-abcd-3333")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (0, 1, 2)),
        ("1", (1,)),
        ("0,1", (0, 1)),
        ("2,0", (2, 0)),
        (" 1 , 2 ", (1, 2)),
        ("", ()),
        ("-1", ()),
        ("0,-1,1", (0,)),
        ("0,7,1", (0,)),
        ("1,1", (1,)),
        ("0,,1", (0,)),
        ("GPU-bbbb-2222", (1,)),
        ("GPU-bbbb", (1,)),
        ("bbbb-2222,0", (1, 0)),
        ("GPU-a", ()),  # ambiguous prefix: matches two GPUs
        ("GPU-ffff", ()),
        ("MIG-0000-1111", ()),
        ("nonsense,0", ()),
    ],
)
def test_parse_cuda_visible_devices(value: str | None, expected: tuple[int, ...]) -> None:
    assert parse_cuda_visible_devices(value, 3, UUIDS) == expected


def test_parse_cuda_visible_devices_without_uuids_or_gpus() -> None:
    assert parse_cuda_visible_devices("GPU-bbbb-2222", 3) == ()
    assert parse_cuda_visible_devices(None, 0) == ()
    assert parse_cuda_visible_devices("0", 0) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max 100000", None),
        ("max 100000\n", None),
        ("max", None),
        ("150000 100000", 2),
        ("50000 100000", 1),
        ("200000 100000\n", 2),
        ("1000 100000", 1),
        ("400000", 4),
        ("-1 100000", None),
        ("0 100000", None),
        ("", None),
        ("lots of cpu", None),
    ],
)
def test_parse_cgroup_cpu_max(text: str, expected: int | None) -> None:
    assert parse_cgroup_cpu_max(text) == expected


# ------------------------------------------------ nvidia-smi subprocess path, through a stand-in binary

needs_fake_nvidia_smi = pytest.mark.skipif(
    HAS_PYNVML or sys.platform == "win32",
    reason="NVML takes precedence over nvidia-smi when pynvml is importable; the stand-in is a POSIX script",
)


def _install_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """Put a FAKE ``nvidia-smi`` (a test stand-in: this machine has no GPU) first on PATH."""
    bin_dir = tmp_path / "fake_nvidia_smi_bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        f"#!/bin/sh\n# FAKE nvidia-smi: a test stand-in printing canned output, not NVIDIA's tool.\n{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return script


def _canned_csv_body() -> str:
    # Answers only the exact query the detector sends, so a changed command line fails the test.
    return (
        f'if [ "$1" = "--query-gpu={NVIDIA_SMI_QUERY}" ] '
        '&& [ "$2" = "--format=csv,noheader,nounits" ]; then\n'
        f"cat <<'EOF'\n{CANNED_CSV}EOF\n"
        "else\n  echo 'unexpected arguments' >&2\n  exit 2\nfi"
    )


@needs_fake_nvidia_smi
def test_detect_hardware_through_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _canned_csv_body())

    info = detect_hardware()

    assert info.cuda_available
    assert [(gpu.index, gpu.physical_index, gpu.name) for gpu in info.gpus] == [
        (0, 0, "NVIDIA A100-SXM4-80GB"),
        (1, 1, "NVIDIA GeForce RTX 4090"),
    ]
    assert info.gpus[0].memory_total_bytes == 81920 * MIB
    assert sum(g.memory_free_bytes for g in info.gpus) == (80000 + 1024) * MIB
    assert "2 GPUs" in info.summary()
    assert HardwareInfo.model_validate(json.loads(json.dumps(info.model_dump(mode="json")))) == info


@needs_fake_nvidia_smi
@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("1", [(0, 1)]),
        ("1,0", [(0, 1), (1, 0)]),
        ("GPU-bbbbbbbb", [(0, 1)]),
        ("", []),
        ("-1", []),
    ],
)
def test_fake_nvidia_smi_respects_cuda_visible_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, visible: str, expected: list[tuple[int, int]]
) -> None:
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _canned_csv_body())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)

    info = detect_hardware()

    assert [(gpu.index, gpu.physical_index) for gpu in info.gpus] == expected
    assert info.cuda_available == bool(expected)
    if not expected:
        assert info.summary().endswith("no GPU")


@needs_fake_nvidia_smi
def test_failing_fake_nvidia_smi_means_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_nvidia_smi(
        tmp_path,
        monkeypatch,
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9',
    )
    info = detect_hardware()
    assert info.gpus == () and not info.cuda_available


@needs_fake_nvidia_smi
def test_hanging_fake_nvidia_smi_times_out_to_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_nvidia_smi(tmp_path, monkeypatch, "exec sleep 30")
    monkeypatch.setattr(nvidia_probe, "NVIDIA_SMI_TIMEOUT_S", 0.3)
    info = detect_hardware()
    assert info.gpus == () and not info.cuda_available


# ------------------------------------------------ probe starts across repeated detections (heartbeats)


def _counting_fake_nvidia_smi_body(counter: Path) -> str:
    return f"echo run >> '{counter}'\n" + _canned_csv_body()


@needs_fake_nvidia_smi
def test_nvidia_smi_runs_once_across_heartbeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "runs.txt"
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _counting_fake_nvidia_smi_body(counter))
    monkeypatch.setattr(nvidia_probe, "NVIDIA_SMI_REFRESH_S", 3600.0)

    infos = [detect_hardware() for _ in range(5)]

    assert counter.read_text().splitlines() == ["run"]
    assert all(len(info.gpus) == 2 for info in infos)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # applied to the kept answer, not cached with it
    assert [(gpu.index, gpu.physical_index) for gpu in detect_hardware().gpus] == [(0, 1)]
    assert len(counter.read_text().splitlines()) == 1


@needs_fake_nvidia_smi
def test_nvidia_smi_answer_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "runs.txt"
    _install_fake_nvidia_smi(tmp_path, monkeypatch, _counting_fake_nvidia_smi_body(counter))
    monkeypatch.setattr(nvidia_probe, "NVIDIA_SMI_REFRESH_S", 0.0)
    for _ in range(3):
        detect_hardware()
    assert len(counter.read_text().splitlines()) == 3


@needs_fake_nvidia_smi
def test_failing_nvidia_smi_is_not_rerun_each_heartbeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "runs.txt"
    _install_fake_nvidia_smi(tmp_path, monkeypatch, f"echo run >> '{counter}'\nexit 9")
    monkeypatch.setattr(nvidia_probe, "NVIDIA_SMI_REFRESH_S", 3600.0)
    assert all(detect_hardware().gpus == () for _ in range(4))
    assert len(counter.read_text().splitlines()) == 1


class FakeNvml(types.ModuleType):
    """A STAND-IN ``pynvml`` module (this machine has no NVIDIA driver): two GPUs, and a count of every call.

    ``free[i]`` is what the next memory read of GPU ``i`` answers; ``fail_memory`` makes memory reads raise.
    """

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.calls: dict[str, int] = {}
        self.free = [80 * GIB, 1 * GIB]
        self.fail_memory = False

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self) -> None:  # noqa: N802 - NVML's own spelling
        self._count("init")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._count("shutdown")

    def nvmlSystemGetDriverVersion(self) -> bytes:  # noqa: N802
        self._count("driver")
        return b"550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return 12040

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._count("count")
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        self._count("name")
        return ["NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"][handle]

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return f"GPU-{handle}{handle}{handle}{handle}-fake"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        self._count("memory")
        if self.fail_memory:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return types.SimpleNamespace(total=[80 * GIB, 24 * GIB][handle], free=self.free[handle])


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


@pytest.mark.skipif(sys.platform == "darwin", reason="Apple silicon reports its own GPU, not NVIDIA's")
def test_nvml_starts_once_and_rereads_only_memory(fake_nvml: FakeNvml) -> None:
    first = detect_hardware()
    fake_nvml.free = [10 * GIB, 2 * GIB]
    later = [detect_hardware() for _ in range(4)]

    assert fake_nvml.calls["init"] == 1
    assert fake_nvml.calls.get("shutdown", 0) == 0
    assert (fake_nvml.calls["count"], fake_nvml.calls["name"], fake_nvml.calls["driver"]) == (1, 2, 1)
    assert fake_nvml.calls["memory"] == 2 + 2 * 5  # one probe round at start, then one read per GPU per call
    assert [gpu.memory_free_bytes for gpu in first.gpus] == [80 * GIB, 1 * GIB]
    assert [gpu.memory_free_bytes for gpu in later[-1].gpus] == [10 * GIB, 2 * GIB]  # fresh, not cached
    assert later[-1].gpus[0].name == "NVIDIA A100-SXM4-80GB"
    assert (later[-1].gpus[0].driver_version, later[-1].gpus[0].cuda_version) == ("550.54.15", "12.4")


@pytest.mark.skipif(sys.platform == "darwin", reason="Apple silicon reports its own GPU, not NVIDIA's")
def test_broken_nvml_session_is_restarted(fake_nvml: FakeNvml) -> None:
    assert len(detect_hardware().gpus) == 2
    fake_nvml.fail_memory = True
    lost = detect_hardware()
    assert [gpu.memory_free_bytes for gpu in lost.gpus] == [0, 0]
    assert fake_nvml.calls["shutdown"] == 1  # the broken session is closed...
    fake_nvml.fail_memory = False
    assert [gpu.memory_free_bytes for gpu in detect_hardware().gpus] == [80 * GIB, 1 * GIB]
    assert fake_nvml.calls["init"] == 2  # ...and started again on the next call


@pytest.mark.skipif(sys.platform == "darwin", reason="Apple silicon reports its own GPU, not NVIDIA's")
def test_forked_child_starts_its_own_nvml_session(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    detect_hardware()
    monkeypatch.setattr(nvidia_probe.os, "getpid", lambda: -1)  # what a fork looks like to the kept session
    detect_hardware()
    assert fake_nvml.calls["init"] == 2
    assert fake_nvml.calls.get("shutdown", 0) == 0  # the parent's session is not the child's to shut down
