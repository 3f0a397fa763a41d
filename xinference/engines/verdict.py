"""An engine's answer to "can you do this here?": the library checks, the matcher and every adapter share it.

Its own module so that the library checks (``engines/libraries.py``), which the adapter base class calls, import it
without importing that base class.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Verdict"]


@dataclass(frozen=True)
class Verdict:
    """Whether an engine can do something here; when it cannot, ``reason`` is a sentence a user understands."""

    accepted: bool
    reason: str = ""

    @classmethod
    def ok(cls) -> Verdict:
        return cls(True)

    @classmethod
    def reject(cls, reason: str) -> Verdict:
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.accepted
