"""What one worker machine can run models on: CPU cores, RAM and accelerators.

The worker calls :func:`detect_hardware` when it starts and on every heartbeat (free memory moves as models load
and unload), and reports the result to the supervisor as a plain dict (``info.model_dump(mode="json")``). The
supervisor, the engine matcher and the model subprocesses rebuild it with ``HardwareInfo.model_validate(data)``.

The package has one module per job:

- ``models``: the data model, :class:`HardwareInfo` and :class:`GpuInfo`;
- ``host``: the OS, architecture, usable CPU cores (affinity and cgroup quota) and RAM, read afresh each call;
- ``nvidia``: the NVIDIA GPUs through NVML (one session per process, only memory re-read per call) or
  ``nvidia-smi`` (answer kept a few seconds), with ``CUDA_VISIBLE_DEVICES`` applied; see its docstring.

Detection never raises because of a missing or broken GPU stack: any NVML or ``nvidia-smi`` failure is logged at
debug level and reported as "no NVIDIA GPU".
"""

from __future__ import annotations

from xinference.hardware.host import (
    apple_chip_name,
    parse_cgroup_cpu_max,
    read_ram,
    system_and_arch,
    usable_cpu_count,
)
from xinference.hardware.models import GpuInfo, GpuVendor, HardwareInfo
from xinference.hardware.nvidia import (
    NVIDIA_SMI_REFRESH_S,
    NVIDIA_SMI_TIMEOUT_S,
    detect_nvidia_gpus,
    parse_cuda_visible_devices,
    parse_nvidia_smi_csv,
    reset_nvidia_probe,
)

__all__ = [
    "NVIDIA_SMI_REFRESH_S",
    "NVIDIA_SMI_TIMEOUT_S",
    "GpuInfo",
    "GpuVendor",
    "HardwareInfo",
    "detect_hardware",
    "parse_cgroup_cpu_max",
    "parse_cuda_visible_devices",
    "parse_nvidia_smi_csv",
    "reset_nvidia_probe",
]


def detect_hardware() -> HardwareInfo:
    """This machine's hardware now; call it again whenever fresh free-memory numbers are needed.

    CPU and RAM are read afresh; GPU names and totals come from the process's NVML session (memory re-read each
    call) or a recent ``nvidia-smi`` answer. GPU problems never raise. Without GPUs a call costs about 0.2 ms
    (measured on a 2-core Linux VM).
    """
    os_name, arch = system_and_arch()
    ram_total, ram_free = read_ram()
    is_apple_silicon = os_name == "darwin" and arch == "arm64"
    if is_apple_silicon:
        gpus: tuple[GpuInfo, ...] = (
            GpuInfo(
                index=0,
                physical_index=0,
                name=apple_chip_name(),
                vendor="apple",
                memory_total_bytes=ram_total,
                memory_free_bytes=ram_free,
            ),
        )
    else:
        gpus = detect_nvidia_gpus()
    return HardwareInfo(
        os=os_name,
        arch=arch,
        cpu_count=usable_cpu_count(),
        ram_total_bytes=ram_total,
        ram_free_bytes=ram_free,
        is_apple_silicon=is_apple_silicon,
        gpus=gpus,
        cuda_available=any(gpu.vendor == "nvidia" for gpu in gpus),
    )
