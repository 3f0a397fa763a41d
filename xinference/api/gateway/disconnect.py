"""Non-streamed requests stop when their client goes away, as streams do.

A route awaiting a whole response would otherwise keep the engine generating to ``max_tokens`` for nobody.
``until_disconnect`` runs the route's work beside a watcher of the connection; when the client disconnects first,
the work is cancelled: the actor call is cancelled in the model process, and the engine drops the request (llama.cpp
sees its loopback connection close).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Awaitable, TypeVar

from starlette.requests import Request

__all__ = ["until_disconnect"]

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (the body was read already: the next ASGI message is the disconnect)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


async def until_disconnect(request: Request, work: Awaitable[T]) -> tuple[T | None, bool]:
    """``(result, False)`` when ``work`` finished first; ``(None, True)`` when the client left and it was cancelled.

    Errors of ``work`` propagate as usual."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result(), False
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return None, True
