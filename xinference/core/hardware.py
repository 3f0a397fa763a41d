"""What one worker machine can run models on: CPU cores, RAM and accelerators.

The worker calls :func:`detect_hardware` when it starts and again periodically (free memory moves as models
load and unload), and reports the result to the supervisor as a plain dict (``info.model_dump(mode="json")``).
The supervisor, the engine matcher and the model subprocesses rebuild it with
``HardwareInfo.model_validate(data)``.

Detection is cheap (no subprocess and a few small file reads on a machine without accelerators) and caches
nothing, so every call returns fresh numbers. It never raises because of a missing or broken GPU stack: any
NVML or ``nvidia-smi`` failure is logged at debug level and reported as "no NVIDIA GPU".

NVIDIA GPUs are found through NVML when the ``pynvml`` module (package ``nvidia-ml-py``) is importable, else
through an ``nvidia-smi`` binary on ``PATH``. Both list every GPU in the machine; ``CUDA_VISIBLE_DEVICES`` is
then applied the way the CUDA runtime applies it, so the reported GPUs are the ones this worker's processes
can use, numbered as they will see them. NVML numbers GPUs in PCI bus order while the CUDA runtime's default
order is "fastest first"; the two agree on machines with identical GPUs or with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which is what the numbering here assumes.
"""

from __future__ import annotations

import csv
import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

import psutil
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "NVIDIA_SMI_TIMEOUT_S",
    "GpuInfo",
    "GpuVendor",
    "HardwareInfo",
    "detect_hardware",
    "parse_cgroup_cpu_max",
    "parse_cuda_visible_devices",
    "parse_nvidia_smi_csv",
]

logger = logging.getLogger(__name__)

GpuVendor = Literal["nvidia", "apple"]

#: Seconds ``nvidia-smi`` may take before it is killed and the machine is reported without NVIDIA GPUs.
NVIDIA_SMI_TIMEOUT_S = 5.0

_MIB = 1024**2
_GIB = 1024**3
_NVIDIA_SMI_QUERY = "index,name,memory.total,memory.free,uuid,driver_version"
_NOT_AVAILABLE = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}

_T = TypeVar("_T")


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
    #: install command). Filled by the worker (``xinference.model.matcher.library_verdicts``); None when not
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


def detect_hardware() -> HardwareInfo:
    """Detect this machine's hardware now; call it again whenever fresh free-memory numbers are needed.

    Nothing is cached. GPU problems never raise (see the module docstring). Without GPUs a call costs about
    0.2 ms (measured on a 2-core Linux VM); NVML or ``nvidia-smi`` add their own start-up time when present.
    """
    os_name = platform.system().lower() or "unknown"
    arch = _normalize_arch(platform.machine())
    memory = psutil.virtual_memory()
    ram_total, ram_free = int(memory.total), int(memory.available)
    is_apple_silicon = os_name == "darwin" and arch == "arm64"
    if is_apple_silicon:
        gpus: tuple[GpuInfo, ...] = (
            GpuInfo(
                index=0,
                physical_index=0,
                name=_apple_chip_name(),
                vendor="apple",
                memory_total_bytes=ram_total,
                memory_free_bytes=ram_free,
            ),
        )
    else:
        gpus = _detect_nvidia_gpus()
    return HardwareInfo(
        os=os_name,
        arch=arch,
        cpu_count=_usable_cpu_count(),
        ram_total_bytes=ram_total,
        ram_free_bytes=ram_free,
        is_apple_silicon=is_apple_silicon,
        gpus=gpus,
        cuda_available=any(gpu.vendor == "nvidia" for gpu in gpus),
    )


# --------------------------------------------------------------------------------------------- pure parsers


def parse_nvidia_smi_csv(text: str) -> tuple[GpuInfo, ...]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total,memory.free,uuid[,driver_version]
    --format=csv,noheader,nounits`` output (memory in MiB) into GPUs numbered by their physical index.

    Rows without a usable index are skipped; memory columns the driver reports as ``[N/A]`` become 0, and
    missing or ``[N/A]`` uuid/driver columns become ``None``. Never raises on malformed text.
    """
    gpus: list[GpuInfo] = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if len(cells) < 4:
            logger.debug("ignoring short nvidia-smi row %r", row)
            continue
        try:
            index = int(cells[0])
        except ValueError:
            logger.debug("ignoring nvidia-smi row without an index: %r", row)
            continue
        if index < 0:
            continue
        gpus.append(
            GpuInfo(
                index=index,
                physical_index=index,
                name=_optional_cell(cells, 1) or "NVIDIA GPU",
                vendor="nvidia",
                memory_total_bytes=_mib_cell(cells[2]),
                memory_free_bytes=_mib_cell(cells[3]),
                uuid=_optional_cell(cells, 4),
                driver_version=_optional_cell(cells, 5),
            )
        )
    return tuple(gpus)


def parse_cuda_visible_devices(value: str | None, count: int, uuids: Sequence[str | None] = ()) -> tuple[int, ...]:
    """The physical indices of the GPUs a ``CUDA_VISIBLE_DEVICES`` value exposes, in the order processes see
    them (position in the result = the ``cuda:N`` number).

    ``count`` is the number of physical GPUs and ``uuids[i]`` the UUID of physical GPU ``i`` (when known).
    Follows the CUDA runtime's rules: ``None`` (variable unset) exposes every GPU; entries are integer
    indices or GPU UUIDs (``GPU-...``, with or without the prefix, unique prefixes allowed); parsing stops at
    the first entry that is not a valid device, so ``""`` and ``"-1"`` expose none and ``"0,7,1"`` on a
    two-GPU machine exposes only GPU 0. Repeated devices are kept once. MIG instance UUIDs (``MIG-...``) cannot
    be mapped to a whole GPU here and end the list like any unknown entry.
    """
    if value is None:
        return tuple(range(max(0, count)))
    visible: list[int] = []
    for raw in value.split(","):
        entry = raw.strip()
        device = _device_from_entry(entry, count, uuids)
        if device is None:
            if entry:
                logger.debug("CUDA_VISIBLE_DEVICES entry %r is not a device here; later entries are ignored", entry)
            break
        if device not in visible:
            visible.append(device)
    return tuple(visible)


def parse_cgroup_cpu_max(text: str) -> int | None:
    """Whole cores allowed by a cgroup v2 ``cpu.max`` file (``"<quota> <period>"``), rounded up; ``None``
    when there is no quota (``"max ..."``) or the text is not understood.

    ``"150000 100000"`` (1.5 cores) gives 2: a fractional core still runs a thread.
    """
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    return _cores_from_quota(quota, period)


# --------------------------------------------------------------------------------------------- helpers


def _vendor_of(gpu: Any) -> Any:
    if isinstance(gpu, GpuInfo):
        return gpu.vendor
    if isinstance(gpu, Mapping):
        return gpu.get("vendor")
    return None


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / _GIB:.1f} GiB"


def _normalize_arch(machine: str) -> str:
    lowered = machine.strip().lower()
    return _ARCH_ALIASES.get(lowered, lowered) or "unknown"


def _optional_cell(cells: Sequence[str], position: int) -> str | None:
    if position >= len(cells) or cells[position].lower() in _NOT_AVAILABLE:
        return None
    return cells[position]


def _mib_cell(cell: str) -> int:
    try:
        return max(0, int(float(cell) * _MIB))
    except ValueError:
        return 0


def _device_from_entry(entry: str, count: int, uuids: Sequence[str | None]) -> int | None:
    """One ``CUDA_VISIBLE_DEVICES`` entry as a physical index, or ``None`` if it names no device."""
    if not entry:
        return None
    try:
        index = int(entry)
    except ValueError:
        pass
    else:
        return index if 0 <= index < count else None
    wanted = entry.lower()
    if wanted.startswith("mig-"):
        return None
    wanted = wanted.removeprefix("gpu-")
    if not wanted:
        return None
    matches = [
        position
        for position, uuid in enumerate(uuids[:count])
        if uuid and uuid.lower().removeprefix("gpu-").startswith(wanted)
    ]
    return matches[0] if len(matches) == 1 else None


def _cores_from_quota(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return max(1, -(-quota // period))


def _read_small(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_v2_dirs() -> list[Path]:
    """This process's cgroup v2 directory and its ancestors (a quota on any of them applies)."""
    dirs = [_CGROUP_ROOT]
    for line in (_read_small(Path("/proc/self/cgroup")) or "").splitlines():
        if not line.startswith("0::"):
            continue
        relative = PurePosixPath(line[3:].strip())
        parts = [part for part in relative.parts if part != "/"]
        if ".." in parts:
            break
        for depth in range(len(parts), 0, -1):
            dirs.append(_CGROUP_ROOT.joinpath(*parts[:depth]))
    return dirs


def _cgroup_cpu_limit() -> int | None:
    """The tightest CPU quota of cgroup v2 (``cpu.max``) or v1 (``cpu.cfs_quota_us``), in whole cores."""
    limits: list[int] = []
    for directory in _cgroup_v2_dirs():
        text = _read_small(directory / "cpu.max")
        limit = parse_cgroup_cpu_max(text) if text is not None else None
        if limit is not None:
            limits.append(limit)
    for directory in (_CGROUP_ROOT / "cpu", _CGROUP_ROOT / "cpu,cpuacct"):
        quota, period = _read_small(directory / "cpu.cfs_quota_us"), _read_small(directory / "cpu.cfs_period_us")
        if quota is None or period is None:
            continue
        try:
            limit = _cores_from_quota(int(quota), int(period))
        except ValueError:
            continue
        if limit is not None:
            limits.append(limit)
    return min(limits, default=None)


def _usable_cpu_count() -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    if sys.platform.startswith("linux"):
        limit = _cgroup_cpu_limit()
        if limit is not None:
            count = min(count, limit)
    return max(1, count)


def _apple_chip_name() -> str:
    """E.g. ``"Apple M2 Pro"``; a generic name when ``sysctl`` cannot tell."""
    sysctl = shutil.which("sysctl") or "/usr/sbin/sysctl"
    try:
        completed = subprocess.run(
            [sysctl, "-n", "machdep.cpu.brand_string"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("sysctl could not name the Apple chip: %s", exc)
        return "Apple silicon GPU"
    name = completed.stdout.strip() if completed.returncode == 0 else ""
    return name or "Apple silicon GPU"


def _detect_nvidia_gpus() -> tuple[GpuInfo, ...]:
    """The NVIDIA GPUs this process may use, renumbered after ``CUDA_VISIBLE_DEVICES``; empty on any failure."""
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001 - a broken install is as good as none
        logger.debug("pynvml not importable (%s); trying nvidia-smi", exc)
        physical = _query_nvidia_smi()
    else:
        physical = _query_nvml(pynvml)
    return _apply_visible_devices(physical, os.environ.get("CUDA_VISIBLE_DEVICES"))


def _apply_visible_devices(physical: Sequence[GpuInfo], value: str | None) -> tuple[GpuInfo, ...]:
    by_physical = {gpu.physical_index if gpu.physical_index is not None else gpu.index: gpu for gpu in physical}
    if not by_physical:
        return ()
    count = max(by_physical) + 1
    uuids = [by_physical[i].uuid if i in by_physical else None for i in range(count)]
    visible = parse_cuda_visible_devices(value, count, uuids)
    # A device the query skipped still holds its CUDA number, so numbering follows `visible`, gaps included.
    return tuple(
        by_physical[device].model_copy(update={"index": logical})
        for logical, device in enumerate(visible)
        if device in by_physical
    )


def _nvml_try(what: str, call: Callable[..., _T], *args: Any) -> _T | None:
    try:
        return call(*args)
    except Exception as exc:  # noqa: BLE001 - NVML raises its own error classes for every "not supported"
        logger.debug("NVML %s failed: %s", what, exc)
        return None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _cuda_version_text(version: Any) -> str | None:
    """NVML's CUDA driver version integer (``12040``) as ``"12.4"``."""
    if not isinstance(version, int) or version <= 0:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def _query_nvml(pynvml: Any) -> list[GpuInfo]:
    """Every NVIDIA GPU NVML sees, numbered physically; empty when NVML cannot start (no driver, no GPU)."""
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        logger.debug("NVML could not start (%s): reporting no NVIDIA GPU", exc)
        return []
    try:
        driver_version = _as_text(_nvml_try("driver version", pynvml.nvmlSystemGetDriverVersion))
        cuda_version = _cuda_version_text(_nvml_try("CUDA version", pynvml.nvmlSystemGetCudaDriverVersion))
        gpus: list[GpuInfo] = []
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            handle = _nvml_try(f"handle of GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                continue
            memory = _nvml_try(f"memory of GPU {index}", pynvml.nvmlDeviceGetMemoryInfo, handle)
            gpus.append(
                GpuInfo(
                    index=index,
                    physical_index=index,
                    name=_as_text(_nvml_try(f"name of GPU {index}", pynvml.nvmlDeviceGetName, handle)) or "NVIDIA GPU",
                    vendor="nvidia",
                    memory_total_bytes=max(0, int(memory.total)) if memory is not None else 0,
                    memory_free_bytes=max(0, int(memory.free)) if memory is not None else 0,
                    uuid=_as_text(_nvml_try(f"UUID of GPU {index}", pynvml.nvmlDeviceGetUUID, handle)),
                    driver_version=driver_version,
                    cuda_version=cuda_version,
                )
            )
        return gpus
    except Exception as exc:  # noqa: BLE001
        logger.debug("NVML query failed (%s): reporting no NVIDIA GPU", exc)
        return []
    finally:
        _nvml_try("shutdown", pynvml.nvmlShutdown)


def _query_nvidia_smi() -> list[GpuInfo]:
    """Every NVIDIA GPU ``nvidia-smi`` lists, numbered physically; empty without the binary or on failure."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return []
    try:
        completed = subprocess.run(
            [executable, f"--query-gpu={_NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("nvidia-smi did not answer (%s): reporting no NVIDIA GPU", exc)
        return []
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip().splitlines()
        logger.debug(
            "nvidia-smi exited with %d (%s): reporting no NVIDIA GPU",
            completed.returncode,
            message[0] if message else "no output",
        )
        return []
    return list(parse_nvidia_smi_csv(completed.stdout))
