"""The stream channel: ``pull_many`` rounds over one local socket per replica instead of an xoscar call each.

Why: a streamed token reaches its client in a round of ``ModelActor.pull_many`` (see ``core/model_actor.py``), and
while the engine keeps every core busy each round's CPU is taken from the engine. An xoscar call costs a message
each way with its serialisation and its dispatch on both sides; the same round over a plain Unix socket is two
small writes, and the chunks the engines already hand over as final JSON text (``engines.base.Chunk``) cross it
as they are, not pickled. Same rounds, same answers: only the transport changes, so every rule of the rounds
(their deadline, ``wake_pulls``, per-stream errors, the reaper) stays where it is.

Who may connect: the socket lives in a fresh directory only this user can enter (mode 0700), and a connection
must first send the replica's random token, which only the actor hands out (``ModelActor.stream_channel``). No
pickle crosses it: frames are JSON headers and raw chunk text. It is local only: an API on another host does not
find the path (or finds a path that will not take the token) and keeps using xoscar, as does one where the
channel is off (``XINFERENCE_STREAM_CHANNEL=0``) or where the platform has no Unix sockets.

Wire: every frame is ``!II`` (length of a JSON header, length of a body), the header, the body.

- hello: ``{"token": ...}``, answered ``{"ok": true}``;
- a round: ``{"ids": [...], "wait": seconds}``, answered by a header ``[[stream_id, done, error, kinds, sizes],
  ...]`` whose chunks are the body, concatenated: ``kinds`` has one letter per chunk, ``b`` for final JSON text
  (kept as bytes) and ``j`` for a dict (encoded here, decoded there); ``error`` is ``null`` or ``[class name,
  message, param, retry_after]`` of an :class:`~xinference.errors.XinferenceError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import struct
import tempfile
from typing import Any, Awaitable, Callable

from xinference import errors
from xinference.core.refs import Pulled
from xinference.engines.base import Chunk
from xinference.errors import EngineError, XinferenceError

__all__ = ["ChannelClient", "ChannelServer", "decode_round", "encode_round"]

logger = logging.getLogger(__name__)

_FRAME = struct.Struct("!II")
#: the hello frame's header can be no longer than this (it is read before the peer proved who it is)
_HELLO_LIMIT = 1024
#: a round request's header (stream ids and a wait) can be no longer than this
_REQUEST_LIMIT = 1 << 20

PullMany = Callable[[list[str], float], Awaitable[dict[str, Pulled]]]


class ChannelClosed(ConnectionError):
    """The peer closed the channel, sent a frame that breaks the wire format, or refused the token."""


def _frame(header: Any, body: bytes = b"") -> bytes:
    head = json.dumps(header, separators=(",", ":")).encode()
    return _FRAME.pack(len(head), len(body)) + head + body


async def _read_frame(reader: asyncio.StreamReader, limit: int | None = None) -> tuple[Any, bytes]:
    try:
        head_size, body_size = _FRAME.unpack(await reader.readexactly(_FRAME.size))
        if limit is not None and head_size + body_size > limit:
            raise ChannelClosed(f"a frame of {head_size + body_size} bytes is over the limit of {limit}")
        head = await reader.readexactly(head_size)
        body = await reader.readexactly(body_size) if body_size else b""
    except asyncio.IncompleteReadError as exc:
        raise ChannelClosed("the peer closed the stream channel") from exc
    try:
        return json.loads(head), body
    except ValueError as exc:
        raise ChannelClosed("the peer sent a frame that is not JSON") from exc


def _error_fields(error: XinferenceError | None) -> list[Any] | None:
    if error is None:
        return None
    return [type(error).__name__, error.message, error.param, error.retry_after]


def _error_from(fields: list[Any] | None) -> XinferenceError | None:
    if fields is None:
        return None
    name, message, param, retry_after = fields
    cls = getattr(errors, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, XinferenceError)):
        cls = EngineError  # a class this side does not know (another version): the same status family
    return cls(str(message), param=param, retry_after=retry_after)


def encode_round(result: dict[str, Pulled], failed: list[str] | None = None) -> bytes:
    """One round's answer as a frame (the model side). A stream with a chunk that is not JSON ends with an error
    naming why, and its id is added to ``failed`` (the caller aborts it: the API will not pull it again)."""
    header: list[list[Any]] = []
    parts: list[bytes] = []
    for stream_id, (chunks, done, error) in result.items():
        kinds = "".join("b" if isinstance(chunk, bytes) else "j" for chunk in chunks)
        try:
            encoded = [
                chunk if isinstance(chunk, bytes) else json.dumps(chunk, ensure_ascii=False).encode()
                for chunk in chunks
            ]
        except (TypeError, ValueError) as exc:  # not JSON: the stream ends with an error naming why
            logger.exception("stream %s: a chunk cannot cross the stream channel", stream_id)
            header.append([stream_id, True, _error_fields(EngineError(f"a chunk is not JSON: {exc}")), "", []])
            if failed is not None:
                failed.append(stream_id)
            continue
        parts.extend(encoded)
        header.append([stream_id, done, _error_fields(error), kinds, [len(data) for data in encoded]])
    return _frame(header, b"".join(parts))


def decode_round(header: Any, body: bytes) -> dict[str, Pulled]:
    """The inverse of :func:`encode_round` (the API side); a malformed frame raises :class:`ChannelClosed`."""
    result: dict[str, Pulled] = {}
    offset = 0
    try:
        for stream_id, done, error, kinds, sizes in header:
            chunks: list[Chunk] = []
            for kind, size in zip(kinds, sizes, strict=True):
                data = body[offset : offset + size]
                offset += size
                chunks.append(data if kind == "b" else json.loads(data))
            result[str(stream_id)] = (chunks, bool(done), _error_from(error))
    except (TypeError, ValueError) as exc:
        raise ChannelClosed(f"a round's frame does not match the wire format: {exc}") from exc
    if offset != len(body):
        raise ChannelClosed("a round's frame does not match the wire format: its body has bytes left over")
    return result


class ChannelServer:
    """The model side: listens on a fresh Unix socket and answers each connection's rounds with ``pull_many``."""

    def __init__(self, pull_many: PullMany, abort: Callable[[str], Awaitable[Any]] | None = None) -> None:
        """``pull_many`` answers the rounds; ``abort`` ends a stream that a round could not encode."""
        self._pull_many = pull_many
        self._abort = abort
        self.token = secrets.token_hex(16)
        self._dir = tempfile.mkdtemp(prefix="xinf-stream-")  # mode 0700: only this user reaches the socket
        self.path = os.path.join(self._dir, "channel")
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    async def close(self) -> None:
        """Stop listening and close every connection (the API side then falls back to xoscar or sees the end)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            hello, _ = await _read_frame(reader, _HELLO_LIMIT)
            token = hello.get("token") if isinstance(hello, dict) else None
            if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
                logger.warning("a connection to the stream channel did not send this replica's token: closed")
                return
            writer.write(_frame({"ok": True}))
            while True:
                request, _ = await _read_frame(reader, _REQUEST_LIMIT)
                ids, wait = request["ids"], float(request["wait"])
                if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
                    raise ChannelClosed("a round's ids are not a list of strings")
                failed: list[str] = []
                writer.write(encode_round(await self._pull_many(ids, wait), failed))
                if self._abort is not None:
                    for stream_id in failed:
                        await self._abort(stream_id)
                await writer.drain()
        except (ChannelClosed, ConnectionError, KeyError, TypeError, ValueError) as exc:
            logger.debug("a stream channel connection ended: %s", exc)
        except Exception:  # noqa: BLE001 - the API makes the round again over xoscar, which reports the failure
            logger.exception("a round over the stream channel failed")
        finally:
            self._connections.discard(writer)
            writer.close()


class ChannelClient:
    """The API side of one replica's channel: one round at a time (the replica's pump is its only user)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def connect(cls, path: str, token: str) -> ChannelClient:
        """Connect and present the token; raises ``OSError`` (incl. :class:`ChannelClosed`) when that fails."""
        if not os.path.exists(path):  # the replica runs on another host
            raise FileNotFoundError(path)
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(_frame({"token": token}))
        try:
            answer, _ = await _read_frame(reader, _HELLO_LIMIT)
        except BaseException:
            writer.close()
            raise
        if answer != {"ok": True}:
            writer.close()
            raise ChannelClosed("the stream channel refused the token")
        return cls(reader, writer)

    async def pull_many(self, stream_ids: list[str], max_wait: float) -> dict[str, Pulled]:
        """One round, as ``ModelActor.pull_many``; raises :class:`ChannelClosed` or ``OSError`` when the channel
        breaks (then it is of no further use)."""
        self._writer.write(_frame({"ids": stream_ids, "wait": max_wait}))
        header, body = await _read_frame(self._reader)
        return decode_round(header, body)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
