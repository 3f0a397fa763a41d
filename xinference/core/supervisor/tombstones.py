"""Tombstones: the launches terminated on purpose, so that a replica of one reported later is killed, not adopted.

A worker cut off from the supervisor keeps running its replicas. If the model is terminated meanwhile, the worker
never hears of it; when it comes back it reports the replica, and without a record of the termination a supervisor
(especially one restarted in between, which knows nothing) would adopt it and serve a model nobody runs any more.
Each launch has an id that its replicas carry (``ModelRecord.launch_id``); terminating it leaves a tombstone here.

Kept in ``XINFERENCE_HOME/supervisor/tombstones.json`` (newest ``MAX_TOMBSTONES``, written atomically, ~100 bytes
each), so a supervisor restart does not forget them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

__all__ = ["MAX_TOMBSTONES", "Tombstones"]

logger = logging.getLogger(__name__)

MAX_TOMBSTONES = 1000


class Tombstones:
    """Launch id -> (model uid, when terminated), oldest first, read once from ``path`` and written on each add."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, tuple[str, float]] = {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = []
        for item in data if isinstance(data, list) else []:
            if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
                self._entries[item[0]] = (str(item[1]), float(item[2]))

    def __contains__(self, launch_id: object) -> bool:
        return isinstance(launch_id, str) and launch_id in self._entries

    def add(self, launch_id: str, model_uid: str) -> None:
        self._entries[launch_id] = (model_uid, time.time())
        while len(self._entries) > MAX_TOMBSTONES:
            del self._entries[next(iter(self._entries))]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps([[k, uid, at] for k, (uid, at) in self._entries.items()]), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:  # the termination stands; only a restart would forget it
            logger.warning("could not write the tombstones file: %s", exc)
