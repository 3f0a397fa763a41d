"""Cluster membership: workers joining, heartbeating, leaving or going silent, and the replica events they report
(a plain part of the supervisor, given the worker and model tables, the ledger, the tombstones and this
supervisor's incarnation).

A worker that stops heartbeating for ``settings.worker_timeout()`` seconds is declared gone and its replicas leave
the routes and what they held is released in the ledger; a worker that comes back (after a supervisor restart, a
partition, or its own restart) re-registers with the replicas it runs, and the supervisor answers keep or kill for
each: a replica is kept only when its launch (``launch_id``) still holds its uid, was not terminated (tombstones)
and still wants it, so a model terminated while its worker was away does not come back and a reused uid never
serves another model. A replica whose process died is reported by its worker (and restarted there, under the same
rule). Each of these leaves an entry in the model's events, and the model's status follows its replicas
(:meth:`ModelRecord.refresh_status`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from xinference import settings
from xinference.core.launch import LaunchPlan
from xinference.core.ledger import Ledger, LedgerConflict
from xinference.core.refs import worker_ref
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import ModelRecord, Replica, WorkerEntry, Workers
from xinference.core.supervisor.tombstones import Tombstones
from xinference.hardware import HardwareInfo
from xinference.model.registry import SpecChoice
from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["Connect", "Membership"]

logger = logging.getLogger(__name__)


#: How the supervisor reaches a worker that joins: its actor reference, from its address.
Connect = Callable[[str], Awaitable[Any]]


class Membership:
    """The workers of the cluster and the replicas they report.

    ``on_join`` runs each time a worker (re-)registers (the supervisor schedules its autostart then); ``connect``
    makes a joining worker's reference (``core/refs.worker_ref``; a test passes its own)."""

    def __init__(
        self,
        workers: Workers,
        models: ModelTable,
        ledger: Ledger,
        tombstones: Tombstones,
        incarnation: str,
        on_join: Callable[[], None],
        connect: Connect = worker_ref,
    ) -> None:
        self._workers = workers
        self._models = models
        self._ledger = ledger
        self._tombstones = tombstones
        self.incarnation = incarnation
        self._on_join = on_join
        self._connect = connect

    async def add_worker(
        self, address: str, hardware: dict[str, Any], replicas: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A worker joins, or re-joins (after a supervisor restart, a partition, or its own restart) with the
        replicas it runs. Returns ``{"kill": {replica_uid: reason}}``: the reported replicas it must stop, because
        their launch was terminated or replaced meanwhile, or their model has all its replicas already; the others
        are adopted. Replicas the supervisor placed there before that the worker no longer reports are gone."""
        ref = await self._connect(address)
        previous = self._workers.get(address)
        if previous is not None:
            previous.gone.set()  # calls waiting on the old registration end; the new one takes over
        self._workers[address] = WorkerEntry(
            address, ref, HardwareInfo.model_validate(hardware), hardware_epoch=self._ledger.epoch
        )
        logger.info("worker %s joined: %s", address, self._workers[address].hardware.summary())
        reports = list(replicas or [])
        self._drop_unreported(address, {str(r.get("plan", {}).get("replica_uid")) for r in reports})
        kill: dict[str, str] = {}
        for reported in reports:
            reason = self._adopt(address, reported)
            if reason is not None:
                kill[reported["plan"]["replica_uid"]] = reason
                logger.warning("replica %s on %s is not adopted: %s", reported["plan"]["replica_uid"], address, reason)
        self._on_join()  # models launched with autostart come back
        return {"kill": kill}

    def _drop_unreported(self, address: str, reported: set[str]) -> None:
        """A worker that (re-)registers without a replica the supervisor believed it ran no longer runs it (it
        restarted): the replica leaves its model and its booking is released. Replicas still being launched there
        are left to their launch."""
        for booking in self._ledger.on_worker(address):
            if booking.state == "loading" or booking.replica_uid in reported:
                continue
            self._ledger.release(booking.replica_uid)
            record = self._models.find(booking.model_uid)
            if record is None:
                continue
            before = len(record.replicas)
            record.replicas = [r for r in record.replicas if r.replica_uid != booking.replica_uid]
            if len(record.replicas) != before:
                record.event("replica_lost", f"{booking.replica_uid}: worker {address} re-registered without it")
                record.refresh_status()
                self._models.changed()

    def _verdict(self, plan: LaunchPlan, address: str) -> str | None:
        """Why a reported replica must be killed, or None to adopt it."""
        if plan.launch_id and plan.launch_id in self._tombstones:
            return f"model {plan.model_uid!r} was terminated while its worker was away"
        record = self._models.find(plan.model_uid)
        if record is None:
            # A launch of this supervisor that is not running any more failed or was terminated here; one of an
            # earlier incarnation is adopted: this supervisor restarted and learns its models from the workers.
            if plan.incarnation and plan.incarnation == self.incarnation:
                return f"its launch of {plan.model_uid!r} is not running any more"
            return None
        if plan.launch_id and record.launch_id != plan.launch_id:
            return f"uid {plan.model_uid!r} belongs to another launch now"
        if record.status in ("unloading", "unloaded", "failed"):
            return f"model {plan.model_uid!r} is {record.status}"
        booking = self._ledger.get(plan.replica_uid)
        if booking is not None and booking.worker != address:
            return f"replica {plan.replica_uid} runs on worker {booking.worker}"
        others = [r for r in record.replicas if r.replica_uid != plan.replica_uid]
        if len(others) >= record.replica:
            return f"model {plan.model_uid!r} has its {record.replica} replica(s) already"
        return None

    def _adopt(self, worker_address: str, reported: dict[str, Any], restarted: bool = False) -> str | None:
        """Take over a replica a (re-)registering worker runs, creating its model's record when unknown; returns
        why it must be killed instead, or None when adopted."""
        plan = LaunchPlan.from_dict(reported["plan"])
        reason = self._verdict(plan, worker_address)
        if reason is not None:
            return reason
        record = self._models.find(plan.model_uid)
        if record is None:
            family = ModelFamily.model_validate(plan.family)
            choice = SpecChoice(family, ModelSpec.model_validate(plan.spec), plan.quantization)
            record = ModelRecord(
                plan.model_uid,
                choice,
                plan.model_engine,
                replica=0,
                status="ready",
                engine_kwargs=dict(plan.engine_config),
                sources={
                    "model_path": plan.model_path,
                    "download_hub": plan.download_hub,
                    "draft": plan.draft,
                    "projector": plan.projector,
                },
            )
            if plan.launch_id:
                record.launch_id = plan.launch_id
            self._models.add(record)
        booking = self._ledger.get(plan.replica_uid)
        if booking is None:
            try:
                self._ledger.book(
                    plan.replica_uid,
                    plan.model_uid,
                    record.launch_id,
                    worker_address,
                    plan.gpu_indices,
                    0,
                    state="running",
                )
            except LedgerConflict as exc:
                if not record.replicas and record.replica == 0:
                    self._models.remove(plan.model_uid)
                return f"its GPUs are held by another replica ({exc})"
        else:
            self._ledger.mark(plan.replica_uid, "running")
        record.replicas = [r for r in record.replicas if r.replica_uid != plan.replica_uid]  # its new address wins
        suffix = plan.replica_uid.rsplit("-", 1)[-1]
        if suffix.isdigit():
            record.next_index = max(record.next_index, int(suffix) + 1)
        record.replicas.append(
            Replica(plan.replica_uid, worker_address, reported["address"], reported.get("pid"), tuple(plan.gpu_indices))
        )
        record.replica = max(record.replica, len(record.replicas))
        record.engine_config = reported.get("engine_config") or record.engine_config
        record.refresh_status()
        if restarted:
            record.event("replica_restarted", f"{plan.replica_uid} serves again (pid {reported.get('pid')})")
        else:
            record.event("replica_adopted", f"{plan.replica_uid} on {worker_address} re-registered")
            logger.info("adopted running replica %s on %s", plan.replica_uid, worker_address)
        self._models.changed()
        return None

    async def heartbeat(self, address: str, hardware: dict[str, Any]) -> bool:
        """A worker is alive; False tells it this supervisor does not know it (restarted) and it must re-register."""
        worker = self._workers.get(address)
        if worker is None:
            return False
        worker.last_seen = time.monotonic()
        worker.hardware = HardwareInfo.model_validate(hardware)
        worker.hardware_epoch = self._ledger.epoch  # measured just before it was sent: milliseconds ago
        return True

    async def remove_worker(self, address: str) -> None:
        """A worker leaves in order (its models were stopped)."""
        self.forget_worker(address, "left the cluster")

    async def list_workers(self) -> list[dict[str, Any]]:
        return [w.info() for w in self._workers.values()]

    async def watch(self) -> None:
        """Declare gone the workers silent for longer than the timeout (runs for the supervisor's lifetime)."""
        while True:
            await asyncio.sleep(min(1.0, settings.worker_timeout() / 4))
            self.expire_silent(time.monotonic())

    def expire_silent(self, now: float) -> list[str]:
        """The workers whose last heartbeat is older than the timeout at ``now`` are gone; returns their addresses."""
        deadline = now - settings.worker_timeout()
        gone = [address for address, worker in self._workers.items() if worker.last_seen < deadline]
        for address in gone:
            silent = now - self._workers[address].last_seen
            self.forget_worker(address, f"stopped heartbeating ({silent:.0f}s silent)")
        return gone

    def forget_worker(self, address: str, why: str) -> None:
        worker = self._workers.pop(address, None)
        if worker is None:
            return
        worker.gone.set()  # launches and control calls waiting on it end now
        self._ledger.release_worker(address)
        logger.warning("worker %s %s; its replicas leave the routes", address, why)
        for record in self._models.records.values():
            lost = [r for r in record.replicas if r.worker_address == address]
            if not lost:
                continue
            record.replicas = [r for r in record.replicas if r.worker_address != address]
            for replica in lost:
                record.event("replica_lost", f"{replica.replica_uid}: worker {address} {why}")
            record.refresh_status()
        self._models.changed()

    # -- replica events reported by workers ---------------------------------------------------------------------
    async def replica_failed(self, model_uid: str, replica_uid: str, message: str, final: bool = False) -> None:
        """A replica's process died; it leaves the routes until its worker restarts it. ``final``: the worker gave
        up restarting it, so what it held is free."""
        if final:
            self._ledger.release(replica_uid)
        record = self._models.find(model_uid)
        if record is None:
            return
        record.replicas = [r for r in record.replicas if r.replica_uid != replica_uid]
        record.event("replica_died", f"{replica_uid}: {message}")
        record.refresh_status()
        self._models.changed()
        logger.warning("replica %s died: %s", replica_uid, message.splitlines()[0] if message else "")

    async def replica_restarted(self, worker_address: str, reported: dict[str, Any]) -> dict[str, Any]:
        """A worker restarted a dead replica: it serves again at its new address, if its launch still wants it.
        Returns ``{"kill": reason}`` (the worker stops it) or ``{"kill": None}``."""
        reason = self._adopt(worker_address, reported, restarted=True)
        if reason is not None:
            logger.warning("restarted replica %s is not wanted: %s", reported["plan"]["replica_uid"], reason)
        return {"kill": reason}
