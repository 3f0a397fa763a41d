"""The hardware data model: :class:`HardwareInfo` (one worker machine) and :class:`GpuInfo` (one accelerator).

Both are frozen pydantic models. The worker builds them (``detect_hardware``), sends them to the supervisor as a
plain dict (``info.model_dump(mode="json")``), and the supervisor, the engine matcher and the model subprocesses
rebuild them with ``HardwareInfo.model_validate(data)``. Nothing here probes the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GpuInfo", "GpuVendor", "HardwareInfo"]

GpuVendor = Literal["nvidia", "apple"]

_GIB = 1024**3


class GpuInfo(BaseModel):
    """One accelerator a worker can place models on.

    ``index`` is the device's number inside this worker's processes, i.e. what ``cuda:N`` means once
    ``CUDA_VISIBLE_DEVICES`` is applied. ``physical_index`` is the driver's number for the same device: a
    child process's ``CUDA_VISIBLE_DEVICES`` must name that (or ``uuid``, which also survives reordering),
    not ``index``. Memory numbers are 0 where the driver does not report them (some unified-memory parts).
    For Apple silicon the memory is the machine's unified RAM, shared with the CPU.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    name: str
    vendor: GpuVendor
    memory_total_bytes: int = Field(ge=0)
    memory_free_bytes: int = Field(ge=0)
    physical_index: int | None = Field(default=None, ge=0)
    uuid: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None


class HardwareInfo(BaseModel):
    """A snapshot of one worker's hardware, as reported to the supervisor and read by the engine matcher.

    ``os`` is ``platform.system()`` lowercased (``"linux"``, ``"darwin"``, ``"windows"``); ``arch`` is the
    machine type with aliases folded (``"x86_64"``, ``"arm64"``; ``AMD64`` and ``aarch64`` map to those).
    ``cpu_count`` is the number of cores this process may actually use (CPU affinity and cgroup quota
    applied), ``ram_free_bytes`` what the OS reports as available. ``cuda_available`` is true exactly when at
    least one NVIDIA GPU is listed; it is derived from ``gpus`` when not given.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    os: str
    arch: str
    cpu_count: int = Field(ge=1)
    ram_total_bytes: int = Field(ge=0)
    ram_free_bytes: int = Field(ge=0)
    is_apple_silicon: bool = False
    gpus: tuple[GpuInfo, ...] = ()
    cuda_available: bool
    #: Per engine, whether its library is available on this worker: ``""`` when it is, else the reason (with the
    #: install command). Filled by the worker (``xinference.engines.libraries.library_verdicts``); None when not
    #: reported, and the matcher then checks the local machine.
    engines: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_cuda_available(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "cuda_available" not in data:
            data = dict(data)
            data["cuda_available"] = any(_vendor_of(gpu) == "nvidia" for gpu in data.get("gpus") or ())
        return data

    @model_validator(mode="after")
    def _check_consistent(self) -> HardwareInfo:
        if self.cuda_available != any(gpu.vendor == "nvidia" for gpu in self.gpus):
            raise ValueError("cuda_available must be true exactly when an NVIDIA GPU is listed in gpus")
        indices = [gpu.index for gpu in self.gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"GPU indices must be unique, got {indices}")
        return self

    def summary(self) -> str:
        """One human-readable line, for logs and the worker listing."""
        platform_part = f"{self.os} {self.arch}" + (" (Apple silicon)" if self.is_apple_silicon else "")
        cores = f"{self.cpu_count} CPU core" + ("" if self.cpu_count == 1 else "s")
        ram = f"{_gib(self.ram_free_bytes)} RAM free of {_gib(self.ram_total_bytes)}"
        if not self.gpus:
            gpu_part = "no GPU"
        else:
            described = "; ".join(
                f"[{gpu.index}] {gpu.name} ({_gib(gpu.memory_free_bytes)} free of {_gib(gpu.memory_total_bytes)})"
                for gpu in self.gpus
            )
            gpu_part = f"{len(self.gpus)} GPU" + ("" if len(self.gpus) == 1 else "s") + f": {described}"
        return f"{platform_part}, {cores}, {ram}, {gpu_part}"


def _vendor_of(gpu: Any) -> Any:
    if isinstance(gpu, GpuInfo):
        return gpu.vendor
    if isinstance(gpu, Mapping):
        return gpu.get("vendor")
    return None


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / _GIB:.1f} GiB"
