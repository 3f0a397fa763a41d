"""Every worker's current CPU, GPU and per-replica process use, asked at scrape time (``GET /metrics``).

A mixin of SupervisorActor. Workers answer concurrently; one that does not within two seconds is left out of
this scrape rather than slowing it down.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["UsageMixin"]


class UsageMixin:
    """Needs ``self._workers`` (address → WorkerEntry)."""

    _workers: dict[str, Any]

    async def worker_usage(self) -> dict[str, dict[str, Any]]:
        """worker address → ``core/resources.machine_usage`` of that worker."""
        out: dict[str, dict[str, Any]] = {}

        async def one(address: str, ref: Any) -> None:
            with contextlib.suppress(Exception):
                out[address] = await asyncio.wait_for(ref.usage(), 2.0)

        await asyncio.gather(*(one(a, w.ref) for a, w in list(self._workers.items())))
        return out
