"""The resource ledger: which replica holds which worker's GPUs and memory, booked before its process starts.

Every path that places a replica (launch, added replicas, reload after a keep-alive unload, adoption of a replica a
worker reports) books it here under the supervisor's lock, and every path that ends one (started and terminated,
failed, cancelled, scaled down, its worker lost, killed on re-registration) releases it here, once. Placement reads
the GPUs held from here, and the memory check subtracts what replicas still loading will take (their processes do
not hold it yet, so the worker's own report of free memory does not show it).

Plain data, no actors and no clock: the supervisor calls it, tests drive it directly.

A booking moves ``loading`` -> ``running`` -> ``stopping``; ``release`` ends it from any state. Each move to
``running`` advances :attr:`Ledger.epoch` and is stamped with it, so a worker report asked for before that move
(stamped with the epoch it was asked at) is known not to show that replica's memory yet: the report and the
booking state are read at different times, and a replica can finish loading between the two. A replica that a
terminate could not reach (its worker did not answer) stays ``stopping``: its process may still hold the GPUs, so
nothing else is placed on them until the worker confirms or is declared gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = ["Booking", "BookingState", "Ledger", "LedgerConflict"]

BookingState = Literal["loading", "running", "stopping"]


class LedgerConflict(RuntimeError):
    """A booking that would hold a GPU twice or book the same replica twice: a bug in the caller, never user input
    (placement only offers free GPUs)."""


@dataclass(frozen=True)
class Booking:
    """One replica's hold on a worker: its GPUs (as that worker numbers them) and its estimated memory."""

    replica_uid: str
    model_uid: str
    launch_id: str
    worker: str
    gpus: tuple[int, ...]
    nbytes: int
    state: BookingState = "loading"
    #: the ledger's epoch when this replica turned ``running`` (0: booked running, already in its worker's report)
    ran_at: int = 0

    def info(self) -> dict[str, Any]:
        return {
            "replica_uid": self.replica_uid,
            "model_uid": self.model_uid,
            "launch_id": self.launch_id,
            "worker": self.worker,
            "gpu_indices": list(self.gpus),
            "bytes": self.nbytes,
            "state": self.state,
        }


class Ledger:
    """The bookings of one supervisor, by replica uid."""

    def __init__(self) -> None:
        self._bookings: dict[str, Booking] = {}
        #: (worker, GPU index) -> replica uid holding it
        self._gpus: dict[tuple[str, int], str] = {}
        #: how many bookings were made and released, for the invariant booked = made - released
        self.made = 0
        self.released = 0
        #: advanced by every move to ``running``; a worker report is stamped with the epoch it was asked for at
        self.epoch = 0

    def __len__(self) -> int:
        return len(self._bookings)

    def __iter__(self) -> Iterator[Booking]:
        return iter(list(self._bookings.values()))

    def get(self, replica_uid: str) -> Booking | None:
        return self._bookings.get(replica_uid)

    def book(
        self,
        replica_uid: str,
        model_uid: str,
        launch_id: str,
        worker: str,
        gpus: Iterable[int],
        nbytes: int,
        state: BookingState = "loading",
    ) -> Booking:
        """Hold ``gpus`` of ``worker`` and ``nbytes`` for ``replica_uid``; LedgerConflict when the replica is booked
        already or a GPU is held by another replica."""
        if replica_uid in self._bookings:
            raise LedgerConflict(f"replica {replica_uid} is booked already")
        gpus = tuple(gpus)
        taken = [(i, self._gpus[(worker, i)]) for i in gpus if (worker, i) in self._gpus]
        if taken:
            raise LedgerConflict(f"GPU(s) of {worker} held already: {taken}")
        booking = Booking(replica_uid, model_uid, launch_id, worker, gpus, max(0, int(nbytes)), state)
        self._bookings[replica_uid] = booking
        for index in gpus:
            self._gpus[(worker, index)] = replica_uid
        self.made += 1
        return booking

    def mark(self, replica_uid: str, state: BookingState) -> Booking | None:
        """Move a booking to ``state``; None when it was released meanwhile."""
        booking = self._bookings.get(replica_uid)
        if booking is None:
            return None
        if state == "running" and booking.state != "running":
            self.epoch += 1
            booking = replace(booking, state=state, ran_at=self.epoch)
        else:
            booking = replace(booking, state=state)
        self._bookings[replica_uid] = booking
        return booking

    def release(self, replica_uid: str) -> Booking | None:
        """End a booking; None (and nothing counted) when there is none: releasing twice is harmless."""
        booking = self._bookings.pop(replica_uid, None)
        if booking is None:
            return None
        for index in booking.gpus:
            if self._gpus.get((booking.worker, index)) == replica_uid:
                del self._gpus[(booking.worker, index)]
        self.released += 1
        return booking

    def release_worker(self, worker: str) -> list[Booking]:
        """A worker is gone: everything booked on it is free."""
        return [b for b in (self.release(b.replica_uid) for b in self.on_worker(worker)) if b is not None]

    def on_worker(self, worker: str) -> list[Booking]:
        return [b for b in self._bookings.values() if b.worker == worker]

    def of_model(self, model_uid: str) -> list[Booking]:
        return [b for b in self._bookings.values() if b.model_uid == model_uid]

    def held(self) -> list[tuple[str, tuple[int, ...]]]:
        """(worker, GPU indices) of every booking: what placement counts as occupied."""
        return [(b.worker, b.gpus) for b in self._bookings.values()]

    def loading(self, worker: str, reported_at: int | None = None) -> tuple[int, dict[int, int]]:
        """Memory that replicas on ``worker`` take beyond a report of it asked for at epoch ``reported_at``: those
        still loading, and those that turned running after it was asked for (None: only those loading). As (RAM
        bytes of CPU replicas, GPU index -> bytes of GPU replicas, split evenly over a replica's GPUs). Replicas
        that ran before the report are in it."""
        ram = 0
        vram: dict[int, int] = {}
        for booking in self._bookings.values():
            if booking.worker != worker:
                continue
            late = booking.state == "running" and reported_at is not None and booking.ran_at > reported_at
            if booking.state != "loading" and not late:
                continue
            if not booking.gpus:
                ram += booking.nbytes
            for index in booking.gpus:
                vram[index] = vram.get(index, 0) + booking.nbytes // len(booking.gpus)
        return ram, vram

    def snapshot(self) -> list[dict[str, Any]]:
        return [b.info() for b in self._bookings.values()]
