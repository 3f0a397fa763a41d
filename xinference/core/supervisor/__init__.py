"""The supervisor: the cluster's control plane (see :mod:`xinference.core.supervisor.actor`)."""

from __future__ import annotations

from xinference.core.supervisor.actor import SupervisorActor
from xinference.core.supervisor.records import LaunchRequest, ModelRecord

__all__ = ["LaunchRequest", "ModelRecord", "SupervisorActor"]
