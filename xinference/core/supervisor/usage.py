"""Every worker's current CPU, GPU and per-replica process use, asked at scrape time (``GET /metrics``).

A plain part of the supervisor, over its worker table. Workers answer concurrently; one that does not within two
seconds is left out of this scrape rather than slowing it down.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from xinference.core.refs import WorkerRef
from xinference.core.supervisor.records import Workers

__all__ = ["Usage"]


class Usage:
    """Asks every worker of ``workers`` for its machine's use."""

    def __init__(self, workers: Workers) -> None:
        self._workers = workers

    async def of_workers(self) -> dict[str, dict[str, Any]]:
        """worker address → ``core/resources.machine_usage`` of that worker."""
        out: dict[str, dict[str, Any]] = {}

        async def one(address: str, ref: WorkerRef) -> None:
            with contextlib.suppress(Exception):
                out[address] = await asyncio.wait_for(ref.usage(), 2.0)

        await asyncio.gather(*(one(a, w.ref) for a, w in list(self._workers.items())))
        return out
