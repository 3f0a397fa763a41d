"""Which event loop the platform's processes run on, and running a ``main`` coroutine on it.

Why: the API process relays every streamed round through a few event-loop passes (the channel's read, the pump,
the response generator, the write to the client), and uvloop's passes cost less CPU than asyncio's own loop in
pure Python. xoscar already runs the model processes on uvloop when it is installed; the entry points here make
the API, supervisor and worker processes match. ``XINFERENCE_EVENT_LOOP=asyncio`` keeps the standard loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from xinference import settings

__all__ = ["CHOICES", "EventLoopChoiceError", "choose", "run"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CHOICES = ("auto", "uvloop", "asyncio")


class EventLoopChoiceError(click.ClickException):
    """``XINFERENCE_EVENT_LOOP`` names a loop that is unknown or not installed (the command prints it and exits 1,
    before anything starts)."""


def choose(choice: str | None = None) -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop ``choice`` (default: the setting) selects here; raises
    EventLoopChoiceError, naming the value and the choices, when it cannot be had."""
    wanted = settings.event_loop() if choice is None else choice
    if wanted not in CHOICES:
        raise EventLoopChoiceError(f"XINFERENCE_EVENT_LOOP={wanted!r} is not one of {', '.join(CHOICES)}")
    if wanted == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401 - only whether it imports
    except ImportError as exc:
        if wanted == "uvloop":
            raise EventLoopChoiceError(
                "XINFERENCE_EVENT_LOOP=uvloop, but uvloop is not installed here (pip install uvloop, or use auto)"
            ) from exc
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T], name: str | None = None) -> T:
    """``asyncio.run(main)`` on loop ``name`` (``"uvloop"`` or ``"asyncio"``, as :func:`choose` returns; default:
    what the setting selects). Entry points call :func:`choose` first, so a bad setting stops them before they set
    up logs or pools."""
    try:
        name = choose() if name is None else name
    except EventLoopChoiceError:
        main.close()  # never awaited: no "coroutine was never awaited" warning beside the real error
        raise
    logger.debug("event loop: %s", name)
    if name == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
