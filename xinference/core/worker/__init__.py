"""The worker: one per node; runs the node's model replicas (see ``actor.py``)."""

from __future__ import annotations

from xinference.core.worker.actor import WorkerActor
from xinference.core.worker.replica import _Replica

__all__ = ["WorkerActor", "_Replica"]
