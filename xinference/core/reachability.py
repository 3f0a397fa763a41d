"""A bounded check that an actor pool's address accepts TCP connections, made before xoscar connects to it.

Why: xoscar gives a connection attempt 8 s (its ``XOSCAR_CONNECT_TIMEOUT``, not configurable per call) and makes it
while holding its router's lock, the one lock of every new connection of the process. An address that does not
answer (its host is down or cut off: the SYN is dropped rather than refused) therefore stalls the caller for 8 s
and, meanwhile, every other new connection of the process, to live replicas too. Opening a plain TCP connection
first, with a short timeout and outside that lock, tells within that timeout whether the address answers; when it
does, xoscar's own connect follows at once and succeeds.

A refused connection (the process is gone, its host is up) fails here at once, as it would in xoscar.
"""

from __future__ import annotations

import asyncio

__all__ = ["probe_connect"]


def _host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) of an actor address; None for another scheme (unix socket, UCX)."""
    if "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


async def probe_connect(address: str, timeout: float) -> None:
    """Open and close one TCP connection to ``address`` within ``timeout`` seconds.

    Raises ``ConnectionRefusedError`` (or another ``OSError``) when the connection is refused or fails, and
    ``ConnectionError`` when nothing answered within ``timeout``. An address that is not ``host:port`` is not
    probed (returns at once): xoscar's own connect handles it."""
    target = _host_port(address)
    if target is None:
        return
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(*target), timeout)
    except asyncio.TimeoutError:
        raise ConnectionError(f"{address} did not accept a connection within {timeout:g}s") from None
    # The pool reads EOF from this connection and drops it quietly (logged at DEBUG by xoscar).
    writer.close()
