"""Placing replicas and booking what they hold: one set of rules for every path that starts a replica.

A launch, more replicas for a running model and a reload after a keep-alive unload all come here, under the
supervisor's lock: the replicas are placed (``core/placement.py``, GPUs never shared), tensor-parallel engines get
as many GPUs per replica as they need, the engine must be able to run on each placement, each replica's estimated
memory is checked against its worker's free memory minus what replicas still loading there will take, and then it
is booked in the ledger (``core/ledger.py``). The checks run one replica at a time with the earlier ones booked, so
two replicas of one launch on two GPUs are each checked against their own GPU.

Plain code over the supervisor's worker table and ledger (no actor), so the rules are unit-tested as they are. The
only call that leaves the process is :meth:`Booker.refresh`, which the supervisor makes before taking its lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from xinference import settings
from xinference.core.launch import LaunchRequest
from xinference.core.ledger import Ledger
from xinference.core.placement import Placement, parse_gpu_idx, place_replicas, worker_views
from xinference.core.supervisor.records import ModelRecord, WorkerEntry
from xinference.engines.matcher import match_engine
from xinference.engines.memory import check_fit
from xinference.errors import InvalidRequest, ModelUnavailable
from xinference.hardware import HardwareInfo
from xinference.model.registry import SpecChoice

__all__ = ["HARDWARE_TIMEOUT_S", "Booker"]

logger = logging.getLogger(__name__)

#: The longest wait for a worker's fresh hardware report before a memory check; past it, its last report is used.
HARDWARE_TIMEOUT_S = 5.0


class Booker:
    """Places and books replicas over ``workers`` (address -> entry) and ``ledger``, both owned by the supervisor."""

    def __init__(self, workers: dict[str, WorkerEntry], ledger: Ledger) -> None:
        self._workers = workers
        self._ledger = ledger

    async def refresh(self, addresses: Iterable[str]) -> None:
        """Ask these workers for fresh hardware (free memory moves as models come and go), all at once and each
        bounded: a worker that does not answer in time keeps its last report and a WARNING says so. Called before
        the supervisor's lock is taken, so a hung worker delays only the launch that wanted it."""
        entries = [self._workers[a] for a in dict.fromkeys(addresses) if a in self._workers]
        timeout = min(HARDWARE_TIMEOUT_S, settings.worker_call_timeout())

        async def one(worker: WorkerEntry) -> None:
            asked_at = self._ledger.epoch
            try:
                worker.hardware = HardwareInfo.model_validate(
                    await worker.call(worker.ref.hardware(), what="hardware", timeout=timeout)
                )
                worker.hardware_epoch = asked_at
            except Exception as exc:  # noqa: BLE001 - a worker that cannot report keeps its last known numbers
                logger.warning(
                    "worker %s did not report fresh hardware (%s); the memory check uses its last report",
                    worker.address,
                    exc,
                )

        await asyncio.gather(*(one(w) for w in entries))

    def candidates(self, launch: LaunchRequest, count: int) -> list[str]:
        """The workers a placement would use now (to refresh before the lock); empty when it cannot be placed."""
        try:
            return [p.address for p in self.place(count, launch)]
        except (InvalidRequest, ModelUnavailable):
            return []

    def place(self, count: int, launch: LaunchRequest) -> list[Placement]:
        if not self._workers:
            raise ModelUnavailable("no worker has joined this cluster yet")
        views = worker_views(((w.address, w.hardware) for w in self._workers.values()), self._ledger.held())
        return place_replicas(views, count, launch.n_gpu, launch.worker_ip, parse_gpu_idx(launch.gpu_idx))

    def devices_for(self, placement: Placement, hardware: HardwareInfo | None = None) -> HardwareInfo:
        """The hardware one replica may use: only the GPUs placement gave it."""
        hardware = hardware or self._workers[placement.address].hardware
        gpus = tuple(g for g in hardware.gpus if g.index in placement.gpu_indices)
        return hardware.model_copy(update={"gpus": gpus, "cuda_available": any(g.vendor == "nvidia" for g in gpus)})

    def check_engine_fits(self, engine: str, choice: SpecChoice, placement: Placement) -> None:
        found = match_engine(engine, [choice], self.devices_for(placement))
        if not found.ok:
            raise InvalidRequest(
                f"{engine} cannot run a replica on worker {placement.address}: {found.reason()}", param="worker_ip"
            )

    def sized(self, record: ModelRecord, count: int, launch: LaunchRequest) -> list[Placement]:
        """Placements for ``count`` replicas; an engine that shards a model over several GPUs (tensor parallelism)
        gets that many per replica when ``n_gpu`` is ``auto``."""
        placements = self.place(count, launch)
        engine_cls, config = record.engine()
        needed = engine_cls.gpus_needed(config)
        first = self._workers[placements[0].address]
        if (
            needed
            and launch.n_gpu == "auto"
            and launch.gpu_idx is None
            and first.hardware.gpus
            and needed != len(placements[0].gpu_indices)
        ):
            launch.n_gpu = needed
            placements = self.place(count, launch)
        return placements

    def book(self, record: ModelRecord, placements: list[Placement], check_memory: bool) -> list[str]:
        """Check and book one replica per placement for ``record``; returns their replica uids. Nothing stays
        booked when one is refused (InvalidRequest naming the numbers)."""
        engine_cls, _ = record.engine()
        choice = record.choice
        engine_kwargs = dict(record.engine_kwargs)
        if record.sources.get("projector"):  # a launch field, held beside the options: its file counts too
            engine_kwargs["projector"] = record.sources["projector"]
        for placement in placements:
            self.check_engine_fits(record.model_engine, choice, placement)
        booked: list[str] = []
        try:
            for placement in placements:
                devices = self.devices_for(placement)
                if check_memory:
                    problem = check_fit(
                        choice.family,
                        choice.spec,
                        choice.quantization,
                        self.devices_for(placement, self._free_now(placement.address)),
                        engine_kwargs,
                        1,
                        engine=engine_cls,
                    )
                    if problem is not None:
                        raise InvalidRequest(problem, param="ignore_memory_check")
                need = engine_cls.estimate_memory(
                    choice.family, choice.spec, choice.quantization, engine_kwargs, devices
                ).total
                replica_uid = f"{record.model_uid}-{record.next_index}"
                record.next_index += 1
                self._ledger.book(
                    replica_uid, record.model_uid, record.launch_id, placement.address, placement.gpu_indices, need
                )
                booked.append(replica_uid)
        except BaseException:
            for replica_uid in booked:
                self._ledger.release(replica_uid)
            raise
        return booked

    def _free_now(self, address: str) -> HardwareInfo:
        """The worker's last report with the memory of replicas still loading there taken off (their processes do
        not hold it yet, so the report does not show it), and of those that finished loading after the report was
        asked for (the report was taken before they held it: without this, a replica that turns running while
        another launch waits for the lock is counted by neither, and the worker is booked past its memory)."""
        worker = self._workers[address]
        hardware = worker.hardware
        ram, vram = self._ledger.loading(address, worker.hardware_epoch)
        if not ram and not vram:
            return hardware
        gpus = tuple(
            g.model_copy(update={"memory_free_bytes": max(0, g.memory_free_bytes - vram.get(g.index, 0))})
            for g in hardware.gpus
        )
        return hardware.model_copy(update={"ram_free_bytes": max(0, hardware.ram_free_bytes - ram), "gpus": gpus})
