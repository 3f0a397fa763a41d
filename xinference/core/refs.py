"""How actors find each other: the uid each actor kind is created under, and references to them by address.

Kept apart from the actor classes so that one actor can reach another without importing it (the supervisor and
the worker call each other; importing each other's class was an import circle).
"""

from __future__ import annotations

from typing import Any

import xoscar as xo

__all__ = ["MODEL_UID", "SUPERVISOR_UID", "WORKER_UID", "replica_ref", "supervisor_ref", "worker_ref"]

#: The uid of the one SupervisorActor of a cluster, in its pool.
SUPERVISOR_UID = "supervisor"
#: The uid of a node's WorkerActor, in the node's main pool.
WORKER_UID = "worker"
#: The uid of the ModelActor in each replica's process.
MODEL_UID = "model"


async def supervisor_ref(address: str) -> Any:
    return await xo.actor_ref(address=address, uid=SUPERVISOR_UID)


async def worker_ref(address: str) -> Any:
    return await xo.actor_ref(address=address, uid=WORKER_UID)


async def replica_ref(address: str) -> Any:
    return await xo.actor_ref(address=address, uid=MODEL_UID)
