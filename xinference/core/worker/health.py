"""When a worker checks a replica's health and when a dead replica gets its restart budget back: the rules, as
plain functions over a replica's record and a clock reading (the actor calls them on its loop).
"""

from __future__ import annotations

from xinference.core.worker.replica import _Replica

__all__ = ["HEALTH_INTERVAL_S", "RESTART_BUDGET_RESET_S", "health_due", "refill_restart_budget"]

#: Seconds between two health checks of a replica whose engine has one (a managed server process).
HEALTH_INTERVAL_S = 5.0
#: A replica that served this long since its last (re)start gets its whole restart budget back: the budget stops a
#: crash loop (a process that dies while or soon after loading), not a replica that dies now and then over days
RESTART_BUDGET_RESET_S = 30.0


def health_due(replica: _Replica, now: float) -> bool:
    """Whether to ask the replica's engine for its health now (and note that it was asked): replicas whose engine
    has its own check (a managed server) are asked every ``HEALTH_INTERVAL_S``, one check at a time."""
    if not replica.has_health_check or replica.checking:
        return False
    if now - replica.last_health < HEALTH_INTERVAL_S:
        return False
    replica.last_health = now
    return True


def refill_restart_budget(replica: _Replica, now: float) -> None:
    """A replica that died after serving ``RESTART_BUDGET_RESET_S`` since its last start is not in a crash loop:
    its restarts in a row start again from 0."""
    if replica.serving_since and now - replica.serving_since >= RESTART_BUDGET_RESET_S:
        replica.restarts = 0
