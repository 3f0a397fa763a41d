"""Hardware shapes for tests of matching, memory fit and placement (machines this CI box is not)."""

from __future__ import annotations

from xinference.hardware import GpuInfo, HardwareInfo

GIB = 1 << 30


def linux(
    cores: int = 2,
    ram_total: int = 24,
    ram_free: int = 20,
    gpus: int = 0,
    gpu_name: str = "H100",
    vram: int = 80,
    vram_free: int = 79,
) -> HardwareInfo:
    """A Linux x86_64 machine (sizes in GiB), with ``gpus`` identical NVIDIA GPUs."""
    return HardwareInfo(
        os="linux",
        arch="x86_64",
        cpu_count=cores,
        ram_total_bytes=ram_total * GIB,
        ram_free_bytes=ram_free * GIB,
        gpus=tuple(
            GpuInfo(
                index=i,
                name=gpu_name,
                vendor="nvidia",
                memory_total_bytes=vram * GIB,
                memory_free_bytes=vram_free * GIB,
            )
            for i in range(gpus)
        ),
    )


def mac(
    cores: int = 10, ram_total: int = 32, ram_free: int = 20, apple_silicon: bool = True, unified_gpu: bool = True
) -> HardwareInfo:
    """A Mac: Apple silicon (its unified memory listed as one GPU unless ``unified_gpu`` is off) or Intel."""
    gpus = ()
    if apple_silicon and unified_gpu:
        gpus = (
            GpuInfo(
                index=0,
                name="Apple M2",
                vendor="apple",
                memory_total_bytes=ram_total * GIB,
                memory_free_bytes=ram_free * GIB,
            ),
        )
    return HardwareInfo(
        os="darwin",
        arch="arm64" if apple_silicon else "x86_64",
        cpu_count=cores,
        ram_total_bytes=ram_total * GIB,
        ram_free_bytes=ram_free * GIB,
        is_apple_silicon=apple_silicon,
        gpus=gpus,
    )
