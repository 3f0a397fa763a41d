"""The replicas a worker runs, saved so that the worker started again with the same ``XINFERENCE_HOME`` relaunches
them (``xinference-worker`` does; ``xinference-local`` does not). JSON of their launch plans, written atomically.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from xinference.core.launch import LaunchPlan

__all__ = ["SavedReplicas"]

logger = logging.getLogger(__name__)


class SavedReplicas:
    """``XINFERENCE_HOME/worker/replicas.json``: a list of ``LaunchPlan.to_dict()``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, plans: list[LaunchPlan]) -> None:
        """Replace the file with ``plans`` (a reader sees the old list or the new one, never half of it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([plan.to_dict() for plan in plans]), encoding="utf-8")
        os.replace(tmp, self.path)

    def load(self) -> list[LaunchPlan]:
        """The saved plans; none when there is no file or it cannot be read (a plan that cannot be read is skipped
        with a warning, the others still relaunch)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        plans = []
        for saved in data if isinstance(data, list) else []:
            try:
                plans.append(LaunchPlan.from_dict(saved))
            except (TypeError, AttributeError) as exc:
                logger.warning("a saved replica cannot be relaunched (%s): %s", exc, str(saved)[:200])
        return plans
