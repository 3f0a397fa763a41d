"""Cluster membership: workers joining, heartbeating, leaving or going silent, and the replica events they report
(a mixin of SupervisorActor).

A worker that stops heartbeating for ``settings.worker_timeout()`` seconds is declared gone and its replicas leave
the routes; a worker that comes back after a supervisor restart re-registers with the replicas it still runs,
which are adopted as they are; a replica whose process died is reported by its worker (and restarted there). Each
of these leaves an entry in the model's events, and the model's status follows its replicas
(:meth:`ModelRecord.refresh_status`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.hardware import HardwareInfo
from xinference.core.model_actor import LaunchPlan
from xinference.core.supervisor.records import ModelRecord, Replica, WorkerEntry
from xinference.model.registry import SpecChoice
from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["MembershipMixin"]

logger = logging.getLogger(__name__)


class MembershipMixin:
    """Needs SupervisorActor's ``_workers``, ``_models``, ``_changed`` and ``_schedule_autostart``."""

    _workers: dict[str, WorkerEntry]
    _models: dict[str, ModelRecord]

    async def add_worker(
        self, address: str, hardware: dict[str, Any], replicas: list[dict[str, Any]] | None = None
    ) -> None:
        """A worker joins (or re-joins after a supervisor restart, bringing the replicas it still runs)."""
        from xinference.core.worker import WorkerActor

        ref = await xo.actor_ref(address=address, uid=WorkerActor.default_uid())
        self._workers[address] = WorkerEntry(address, ref, HardwareInfo.model_validate(hardware))
        logger.info("worker %s joined: %s", address, self._workers[address].hardware.summary())
        for reported in replicas or []:
            self._adopt(address, reported)
        self._schedule_autostart()  # type: ignore[attr-defined] # models launched with autostart come back

    def _adopt(self, worker_address: str, reported: dict[str, Any]) -> None:
        """Take over a replica a re-registering worker still runs; creates its model's record when unknown."""
        plan = LaunchPlan(**reported["plan"])
        record = self._models.get(plan.model_uid)
        if record is None:
            family = ModelFamily.model_validate(plan.family)
            choice = SpecChoice(family, ModelSpec.model_validate(plan.spec), plan.quantization)
            record = ModelRecord(plan.model_uid, choice, plan.model_engine, replica=0, status="ready",
                                 engine_kwargs=dict(plan.engine_config),
                                 sources={"model_path": plan.model_path, "download_hub": plan.download_hub,
                                          "draft": plan.draft})
            self._models[plan.model_uid] = record
        record.replicas = [r for r in record.replicas if r.replica_uid != plan.replica_uid]  # its new address wins
        suffix = plan.replica_uid.rsplit("-", 1)[-1]
        if suffix.isdigit():
            record.next_index = max(record.next_index, int(suffix) + 1)
        record.replicas.append(Replica(plan.replica_uid, worker_address, reported["address"], reported.get("pid"),
                                       tuple(plan.gpu_indices)))
        record.replica = max(record.replica, len(record.replicas))
        record.engine_config = reported.get("engine_config") or record.engine_config
        record.refresh_status()
        record.event("replica_adopted", f"{plan.replica_uid} on {worker_address} re-registered after a restart")
        self._changed()  # type: ignore[attr-defined]
        logger.info("adopted running replica %s on %s", plan.replica_uid, worker_address)

    async def heartbeat(self, address: str, hardware: dict[str, Any]) -> bool:
        """A worker is alive; False tells it this supervisor does not know it (restarted) and it must re-register."""
        worker = self._workers.get(address)
        if worker is None:
            return False
        worker.last_seen = time.monotonic()
        worker.hardware = HardwareInfo.model_validate(hardware)
        return True

    async def remove_worker(self, address: str) -> None:
        """A worker leaves in order (its models were stopped)."""
        await self._worker_gone(address, "left the cluster")

    async def list_workers(self) -> list[dict[str, Any]]:
        return [w.info() for w in self._workers.values()]

    async def _watch_workers(self) -> None:
        """Declare gone the workers silent for longer than the timeout (runs for the supervisor's lifetime)."""
        while True:
            await asyncio.sleep(min(1.0, settings.worker_timeout() / 4))
            self._expire_silent(time.monotonic())

    def _expire_silent(self, now: float) -> list[str]:
        """The workers whose last heartbeat is older than the timeout at ``now`` are gone; returns their addresses."""
        deadline = now - settings.worker_timeout()
        gone = [address for address, worker in self._workers.items() if worker.last_seen < deadline]
        for address in gone:
            silent = now - self._workers[address].last_seen
            self._forget_worker(address, f"stopped heartbeating ({silent:.0f}s silent)")
        return gone

    async def _worker_gone(self, address: str, why: str) -> None:
        self._forget_worker(address, why)

    def _forget_worker(self, address: str, why: str) -> None:
        if self._workers.pop(address, None) is None:
            return
        logger.warning("worker %s %s; its replicas leave the routes", address, why)
        for record in self._models.values():
            lost = [r for r in record.replicas if r.worker_address == address]
            if not lost:
                continue
            record.replicas = [r for r in record.replicas if r.worker_address != address]
            for replica in lost:
                record.event("replica_lost", f"{replica.replica_uid}: worker {address} {why}")
            record.refresh_status()
        self._changed()  # type: ignore[attr-defined]

    # -- replica events reported by workers ---------------------------------------------------------------------
    async def replica_failed(self, model_uid: str, replica_uid: str, message: str) -> None:
        """A replica's process died; it leaves the routes until its worker restarts it."""
        record = self._models.get(model_uid)
        if record is None:
            return
        record.replicas = [r for r in record.replicas if r.replica_uid != replica_uid]
        record.event("replica_died", f"{replica_uid}: {message}")
        record.refresh_status()
        self._changed()  # type: ignore[attr-defined]
        logger.warning("replica %s died: %s", replica_uid, message.splitlines()[0] if message else "")

    async def replica_restarted(self, worker_address: str, reported: dict[str, Any]) -> None:
        """A worker restarted a dead replica: it serves again at its new address."""
        plan = LaunchPlan(**reported["plan"])
        record = self._models.get(plan.model_uid)
        if record is None:
            return
        record.replicas = [r for r in record.replicas if r.replica_uid != plan.replica_uid]
        record.replicas.append(Replica(plan.replica_uid, worker_address, reported["address"], reported.get("pid"),
                                       tuple(plan.gpu_indices)))
        record.refresh_status()
        record.event("replica_restarted", f"{plan.replica_uid} serves again (pid {reported.get('pid')})")
        self._changed()  # type: ignore[attr-defined]
