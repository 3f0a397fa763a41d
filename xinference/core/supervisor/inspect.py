"""Read-only views the web UI and operators need: a replica's log, a launch's progress, the devices of every
worker and the cluster's summary.

A plain part of the supervisor: it only reads the model table, the worker table and the ledger. Logs live on the
worker that runs the replica, so the supervisor picks the replica and forwards the read there.
"""

from __future__ import annotations

import contextlib
from typing import Any

from xinference import settings
from xinference.core.ledger import Ledger
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import Workers
from xinference.errors import InvalidRequest, ModelNotFound, XinferenceError

__all__ = ["Inspector"]


class Inspector:
    """Reads ``models``, ``workers`` and ``ledger``; forwards a log read to the worker that holds the log."""

    def __init__(self, models: ModelTable, workers: Workers, ledger: Ledger) -> None:
        self._models = models
        self._workers = workers
        self._ledger = ledger

    async def cluster_info(self) -> dict[str, Any]:
        """Every worker, every model's replicas, the route version, the devices and the ledger's bookings."""
        return {
            "workers": [w.info() for w in self._workers.values()],
            "models": {uid: [r.info() for r in rec.replicas] for uid, rec in self._models.records.items()},
            "route_version": self._models.version,
            "devices": self.devices(),
            "bookings": self._ledger.snapshot(),
        }

    def replica_for_log(self, model_uid: str, replica: str | None) -> tuple[str, str, list[str]]:
        """(worker address, replica uid, every replica uid of the model) for ``replica``: an index ("0"), a
        replica uid, or None for the first replica (the one being started while a launch is in progress)."""
        record = self._models.get(model_uid)
        known = [(r.worker_address, r.replica_uid) for r in record.replicas]
        if record.pending is not None and record.pending not in known:
            known.append(record.pending)
        known.sort(key=lambda pair: pair[1])
        names = [uid for _, uid in known]
        if not known:
            raise ModelNotFound(f"model {model_uid!r} has no replica yet", param="replica")
        if replica in (None, ""):
            return known[0][0], known[0][1], names
        for worker, uid in known:
            if replica in (uid, uid.rsplit("-", 1)[-1]):
                return worker, uid, names
        raise ModelNotFound(
            f"model {model_uid!r} has no replica {replica!r}; it has: {', '.join(names)}", param="replica"
        )

    async def model_log(
        self, model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
    ) -> dict[str, Any]:
        """``GET /v1/models/{uid}/logs``: the tail of one replica's log, or what it wrote after ``since``."""
        if since is not None and since < 0:
            raise InvalidRequest("since must be a byte offset >= 0", param="since")
        address, replica_uid, names = self.replica_for_log(model_uid, replica)
        worker = self._workers.get(address)
        if worker is None:
            raise ModelNotFound(f"the worker of replica {replica_uid!r} is gone", param="replica")
        piece: dict[str, Any] = await worker.call(
            worker.ref.read_log(replica_uid, tail, since), what="read_log", timeout=settings.worker_call_timeout()
        )
        return {"model_uid": model_uid, "replica_uid": replica_uid, "worker": address, "replicas": names, **piece}

    async def launch_status(self, model_uid: str) -> dict[str, Any]:
        """What the launch of ``model_uid`` is doing now: the model's status, its overall ``progress`` (0.0-1.0:
        replicas done plus the current one's load; 1.0 once it is not launching), the replica being started (index,
        out of how many) and its load's stage, bytes, speed and time left. Every field but ``status`` and
        ``progress`` is None once no replica is starting. One call to the worker, one from it to the model."""
        record = self._models.get(model_uid)
        status: dict[str, Any] = {
            "status": record.status,
            "progress": 1.0,
            "replicas_ready": len(record.replicas),
            "replicas_wanted": record.replica,
            "replica_uid": None,
            "stage": None,
            "done_bytes": None,
            "total_bytes": None,
            "bytes_per_second": None,
            "eta_seconds": None,
        }
        if record.status != "launching":
            return status
        current = 0.0
        pending = record.pending
        worker = self._workers.get(pending[0]) if pending else None
        if pending and worker is not None:
            with contextlib.suppress(XinferenceError):
                answer = await worker.call(
                    worker.ref.launch_status(pending[1]), what="launch_status", timeout=settings.worker_call_timeout()
                )
                current = float(answer.pop("replica_progress", None) or 0.0)
                status.update(answer)
                status["replica_uid"] = pending[1]
        status["progress"] = min((len(record.replicas) + current) / max(record.replica, 1), 1.0)
        return status

    def devices(self) -> list[dict[str, Any]]:
        """Every worker's GPUs (index, name, memory total/used) and the replicas holding each."""
        holders: dict[tuple[str, int], list[str]] = {}
        for record in self._models.records.values():
            for rep in record.replicas:
                for index in rep.gpu_indices:
                    holders.setdefault((rep.worker_address, index), []).append(rep.replica_uid)
        out: list[dict[str, Any]] = []
        for address, worker in self._workers.items():
            for gpu in worker.hardware.gpus:
                out.append(
                    {
                        "worker": address,
                        "index": gpu.index,
                        "name": gpu.name,
                        "vendor": gpu.vendor,
                        "memory_total_bytes": gpu.memory_total_bytes,
                        "memory_used_bytes": gpu.memory_total_bytes - gpu.memory_free_bytes,
                        "models": holders.get((address, gpu.index), []),
                    }
                )
        return out
