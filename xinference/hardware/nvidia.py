"""The NVIDIA probe: which NVIDIA GPUs this process may use, and how busy they are, through NVML or, without it,
``nvidia-smi``.

NVML is used when the ``pynvml`` module (package ``nvidia-ml-py``) is importable. It is started **once per
process** and kept running: the first call reads what does not change (GPU count, names, UUIDs, driver and CUDA
versions) and every later call reads only each GPU's memory, so a worker's heartbeat (every 3 s) costs a few NVML
calls, not an ``nvmlInit``/``nvmlShutdown`` pair. A forked child starts its own session; a session whose memory
reads start failing (driver reloaded, GPU lost) is closed and started again on the next call.

Without NVML the ``nvidia-smi`` binary on ``PATH`` is run, which costs a process start and a driver
initialisation each time, so its answer is kept for :data:`NVIDIA_SMI_REFRESH_S` seconds (free memory on such a
machine is up to that old; install ``nvidia-ml-py`` for live numbers). A failed or timed-out run is kept just as
long, so a hung driver does not stall every heartbeat for :data:`NVIDIA_SMI_TIMEOUT_S`.

Both list every GPU in the machine; ``CUDA_VISIBLE_DEVICES`` is then applied (on every call, never cached) the
way the CUDA runtime applies it, so the reported GPUs are the ones this worker's processes can use, numbered as
they will see them. NVML numbers GPUs in PCI bus order while the CUDA runtime's default order is "fastest
first"; the two agree on machines with identical GPUs or with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which is what the
numbering here assumes. No failure raises: it is logged at debug level and reported as "no NVIDIA GPU".

:func:`detect_nvidia_utilization` (each GPU's busy fraction, for ``/metrics``) reads the same NVML session, or the
same kept ``nvidia-smi`` answer: its query asks for ``utilization.gpu`` too, so a machine without NVML runs the
binary at most once per :data:`NVIDIA_SMI_REFRESH_S` for both the heartbeat and the metrics, and reports a busy
fraction up to that old.
"""

from __future__ import annotations

import atexit
import csv
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xinference.hardware.models import GpuInfo

__all__ = [
    "NVIDIA_SMI_REFRESH_S",
    "NVIDIA_SMI_TIMEOUT_S",
    "GpuUtilization",
    "detect_nvidia_gpus",
    "detect_nvidia_utilization",
    "parse_cuda_visible_devices",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_utilization",
    "reset_nvidia_probe",
]

logger = logging.getLogger(__name__)

#: Seconds ``nvidia-smi`` may take before it is killed and the machine is reported without NVIDIA GPUs.
NVIDIA_SMI_TIMEOUT_S = 5.0
#: Seconds an ``nvidia-smi`` answer (or failure) is reused before the binary is run again.
NVIDIA_SMI_REFRESH_S = 10.0

_MIB = 1024**2
_NVIDIA_SMI_QUERY = "index,name,memory.total,memory.free,uuid,driver_version,utilization.gpu"
#: Position of ``utilization.gpu`` (percent) in a row of :data:`_NVIDIA_SMI_QUERY`.
_UTILIZATION_COLUMN = 6
_NOT_AVAILABLE = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}

_T = TypeVar("_T")


@dataclass(frozen=True)
class GpuUtilization:
    """How busy one GPU was (``utilization`` 0-1, the driver's sample), numbered like :func:`detect_nvidia_gpus`."""

    index: int
    name: str
    utilization: float


def detect_nvidia_gpus() -> tuple[GpuInfo, ...]:
    """The NVIDIA GPUs this process may use, renumbered after ``CUDA_VISIBLE_DEVICES``; empty on any failure."""
    return _apply_visible_devices(_read_physical(busy=False)[0], os.environ.get("CUDA_VISIBLE_DEVICES"))


def detect_nvidia_utilization() -> tuple[GpuUtilization, ...]:
    """The busy fraction of each GPU :func:`detect_nvidia_gpus` lists (same numbering), for the metrics; a GPU whose
    driver does not report it is left out, and any failure gives an empty tuple."""
    physical, busy = _read_physical(busy=True)
    visible = _apply_visible_devices(physical, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return tuple(
        GpuUtilization(gpu.index, gpu.name, busy[gpu.physical_index])
        for gpu in visible
        if gpu.physical_index is not None and gpu.physical_index in busy
    )


def _read_physical(busy: bool) -> tuple[list[GpuInfo], dict[int, float]]:
    """Every GPU in the machine and, when ``busy`` is asked (NVML reads it only then; ``nvidia-smi`` always
    answers it), the busy fraction of those that report it, by physical index."""
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001 - a broken install is as good as none
        logger.debug("pynvml not importable (%s); trying nvidia-smi", exc)
        return _SMI.read()
    return _NVML.read(pynvml, busy)


def reset_nvidia_probe() -> None:
    """Close the NVML session and forget the kept ``nvidia-smi`` answer; the next call probes from scratch.

    For tests, and for a caller that knows the GPUs changed (a driver was installed).
    """
    _NVML.close()
    _SMI.forget()


# --------------------------------------------------------------------------------------------- pure parsers


def parse_nvidia_smi_csv(text: str) -> tuple[GpuInfo, ...]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total,memory.free,uuid[,driver_version[,...]]
    --format=csv,noheader,nounits`` output (memory in MiB) into GPUs numbered by their physical index; columns
    after ``driver_version`` are read by :func:`parse_nvidia_smi_utilization`.

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


def parse_nvidia_smi_utilization(text: str) -> dict[int, float]:
    """The ``utilization.gpu`` column (percent, the seventh of :data:`_NVIDIA_SMI_QUERY`) of the same output, as
    physical index → busy fraction (0-1). Rows without an index or with ``[N/A]``/``[Not Supported]`` there are
    left out; never raises on malformed text."""
    busy: dict[int, float] = {}
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        cells = [cell.strip() for cell in row]
        if len(cells) <= _UTILIZATION_COLUMN:
            continue
        try:
            index, percent = int(cells[0]), float(cells[_UTILIZATION_COLUMN].removesuffix("%").strip())
        except ValueError:
            continue
        if index >= 0 and 0.0 <= percent <= 100.0:
            busy[index] = percent / 100.0
    return busy


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


# --------------------------------------------------------------------------------------------- NVML


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


@dataclass
class _NvmlDevice:
    """What NVML told about one GPU when the session started; only its memory is read again."""

    index: int
    handle: Any
    name: str
    uuid: str | None
    #: Whether the memory read worked at start: a later failure of such a device means the session broke.
    reports_memory: bool


@dataclass
class _NvmlSession:
    pynvml: Any
    pid: int
    devices: list[_NvmlDevice]
    driver_version: str | None
    cuda_version: str | None


@dataclass
class _NvmlProbe:
    """The process's one NVML session, started on first use and closed at exit (or when it breaks)."""

    session: _NvmlSession | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    exit_hook_set: bool = False

    def read(self, pynvml: Any, busy: bool = False) -> tuple[list[GpuInfo], dict[int, float]]:
        """Every GPU with its memory now and, when ``busy``, each one's busy fraction (those that report it)."""
        with self.lock:
            if self.session is not None and (self.session.pid != os.getpid() or self.session.pynvml is not pynvml):
                self.session = None  # a forked child (or another pynvml module): the old session is not ours
            if self.session is None:
                self.session = self._start(pynvml)
                if self.session is None:
                    return [], {}
            session = self.session
            gpus, broken = self._read_memory(session)
            if broken:
                self._close_locked()
                return gpus, {}
            return gpus, self._read_utilization(session) if busy else {}

    def close(self) -> None:
        with self.lock:
            self._close_locked()

    def _close_locked(self) -> None:
        session, self.session = self.session, None
        if session is not None and session.pid == os.getpid():
            _nvml_try("shutdown", session.pynvml.nvmlShutdown)

    def _start(self, pynvml: Any) -> _NvmlSession | None:
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001
            logger.debug("NVML could not start (%s): reporting no NVIDIA GPU", exc)
            return None
        try:
            devices: list[_NvmlDevice] = []
            for index in range(int(pynvml.nvmlDeviceGetCount())):
                handle = _nvml_try(f"handle of GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)
                if handle is None:
                    continue
                name = _as_text(_nvml_try(f"name of GPU {index}", pynvml.nvmlDeviceGetName, handle))
                uuid = _as_text(_nvml_try(f"UUID of GPU {index}", pynvml.nvmlDeviceGetUUID, handle))
                memory = _nvml_try(f"memory of GPU {index}", pynvml.nvmlDeviceGetMemoryInfo, handle)
                devices.append(_NvmlDevice(index, handle, name or "NVIDIA GPU", uuid, memory is not None))
            session = _NvmlSession(
                pynvml=pynvml,
                pid=os.getpid(),
                devices=devices,
                driver_version=_as_text(_nvml_try("driver version", pynvml.nvmlSystemGetDriverVersion)),
                cuda_version=_cuda_version_text(_nvml_try("CUDA version", pynvml.nvmlSystemGetCudaDriverVersion)),
            )
        except Exception as exc:  # noqa: BLE001
            logger.debug("NVML query failed (%s): reporting no NVIDIA GPU", exc)
            _nvml_try("shutdown", pynvml.nvmlShutdown)
            return None
        if not self.exit_hook_set:
            atexit.register(self.close)
            self.exit_hook_set = True
        logger.debug("NVML started: %d GPU(s), driver %s", len(devices), session.driver_version)
        return session

    @staticmethod
    def _read_memory(session: _NvmlSession) -> tuple[list[GpuInfo], bool]:
        """Every GPU with its memory read now, and whether a read that used to work failed."""
        gpus: list[GpuInfo] = []
        broken = False
        for device in session.devices:
            memory = _nvml_try(f"memory of GPU {device.index}", session.pynvml.nvmlDeviceGetMemoryInfo, device.handle)
            broken = broken or (memory is None and device.reports_memory)
            gpus.append(
                GpuInfo(
                    index=device.index,
                    physical_index=device.index,
                    name=device.name,
                    vendor="nvidia",
                    memory_total_bytes=max(0, int(memory.total)) if memory is not None else 0,
                    memory_free_bytes=max(0, int(memory.free)) if memory is not None else 0,
                    uuid=device.uuid,
                    driver_version=session.driver_version,
                    cuda_version=session.cuda_version,
                )
            )
        return gpus, broken

    @staticmethod
    def _read_utilization(session: _NvmlSession) -> dict[int, float]:
        busy: dict[int, float] = {}
        for device in session.devices:
            rates = _nvml_try(
                f"utilization of GPU {device.index}", session.pynvml.nvmlDeviceGetUtilizationRates, device.handle
            )
            if rates is not None:
                busy[device.index] = min(1.0, max(0.0, float(rates.gpu) / 100.0))
        return busy


# --------------------------------------------------------------------------------------------- nvidia-smi


@dataclass
class _SmiProbe:
    """The last ``nvidia-smi`` answer, reused for :data:`NVIDIA_SMI_REFRESH_S` while the binary stays the same."""

    gpus: list[GpuInfo] = field(default_factory=list)
    #: busy fraction by physical index, from the same answer
    busy: dict[int, float] = field(default_factory=dict)
    executable: str | None = None
    read_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> tuple[list[GpuInfo], dict[int, float]]:
        executable = shutil.which("nvidia-smi")
        if executable is None:
            return [], {}
        with self.lock:
            now = time.monotonic()
            fresh = self.read_at is not None and now - self.read_at < NVIDIA_SMI_REFRESH_S
            if not (fresh and self.executable == executable):
                text = _run_nvidia_smi(executable)
                self.gpus, self.busy = list(parse_nvidia_smi_csv(text)), parse_nvidia_smi_utilization(text)
                self.executable, self.read_at = executable, time.monotonic()
            return list(self.gpus), dict(self.busy)

    def forget(self) -> None:
        with self.lock:
            self.gpus, self.busy, self.executable, self.read_at = [], {}, None, None


def _run_nvidia_smi(executable: str) -> str:
    """What ``nvidia-smi`` answers to :data:`_NVIDIA_SMI_QUERY` (every GPU, numbered physically); empty on
    failure."""
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
        return ""
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip().splitlines()
        logger.debug(
            "nvidia-smi exited with %d (%s): reporting no NVIDIA GPU",
            completed.returncode,
            message[0] if message else "no output",
        )
        return ""
    return completed.stdout


_NVML = _NvmlProbe()
_SMI = _SmiProbe()
