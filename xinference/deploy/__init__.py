"""The server commands: ``xinference-local``, ``xinference-supervisor``, ``xinference-worker``.

``xinference-local`` loads ~1,000 modules and builds a few hundred pydantic models and dataclasses before it
serves; Python's cyclic garbage collector would run ~270 times meanwhile (~0.1 s of CPU, a seventh of the start)
and find almost nothing to free. So when the process was started as that command, the collector is paused from
here (this package's ``__init__`` runs before the command's own imports) until the server is ready, where
:func:`resume_gc` collects once, freezes what survived (the modules, the app, the actors: never garbage, and left out
of every later full collection) and turns the collector back on. Imported any other way (tests, the client, other
commands), nothing changes.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

__all__ = ["gc_paused", "resume_gc"]

#: The console commands whose start runs with the collector paused
_PAUSING_COMMANDS = frozenset({"xinference-local"})
_paused = False


def _started_as(commands: frozenset[str]) -> bool:
    argv = getattr(sys, "argv", None) or [""]
    return Path(argv[0]).name in commands


def gc_paused() -> bool:
    """Whether the start-up pause is on (the collector is off until :func:`resume_gc`)."""
    return _paused


def resume_gc() -> None:
    """End the start-up pause: one full collection, freeze what is left, collector back on (nothing when not paused;
    a second call does nothing)."""
    global _paused
    if not _paused:
        return
    _paused = False
    gc.collect()
    gc.freeze()
    gc.enable()


if _started_as(_PAUSING_COMMANDS) and gc.isenabled():
    gc.disable()
    _paused = True
