"""One pump per replica: the API side of streaming (``ModelActor.pull_many``).

Every stream the API has open on a replica is read by that replica's pump, one task that calls ``pull_many`` with
all of their ids and hands each stream's chunks to the stream's :class:`Inbox`, which the request's generator
reads. One actor message per round then serves every stream of the replica, so the platform's cost per token
stops growing with the number of streams. The pump starts with its first stream and ends when it has none.

Failures stay per stream: an error the model actor reports for one stream ends that stream only; a round that
fails as a whole (the replica's process died) ends the streams of that round with the error, and the pump goes
on with any opened since.

Every round has a deadline (``XINFERENCE_STREAM_PULL_TIMEOUT``): a replica whose host vanished without a connection
reset, or whose process is frozen, never answers, and without one its streams and their admission slots would wait
forever. The model actor is asked to answer within a third of the deadline even when no stream has output (a long
prefill), so only a replica that cannot answer at all trips it. Then the round's streams end with a
:class:`ReplicaUnreachable` naming the replica, which frees their slots, and each is aborted in the model process
for when it answers again; the unanswered call is left to finish or fail on its own (cancelling an actor call
waits for the remote side to acknowledge, which is the very thing that does not come).

Rounds travel over the replica's stream channel (``core/stream_channel.py``, one local socket, about half the CPU
of an xoscar call) when the replica offers one and runs on this host, else as ``pull_many`` calls. A channel that
breaks is dropped and its round made again over xoscar, which reports a replica that is gone the usual way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from xinference.core.model_actor import PULL_WAIT_SECONDS
from xinference.core.refs import ReplicaRef
from xinference.core.stream_channel import ChannelClient
from xinference.engines.base import Chunk
from xinference.errors import EngineError, ReplicaUnreachable

__all__ = ["Inbox", "ReplicaPump"]

logger = logging.getLogger(__name__)

#: How a pump calls the model actor: ``call(awaitable)`` maps transport failures to platform errors
CallWrapper = Callable[[Awaitable[Any]], Awaitable[Any]]


class Inbox:
    """The chunks of one stream that its pump pulled and its reader has not taken yet.

    Used by one reader at a time. Chunks of several rounds merge when the reader is slower than the pump (a slow
    client then gets fewer, larger writes); an error is raised after the chunks that came before it.
    """

    __slots__ = ("_chunks", "_done", "_error", "_waiter")

    def __init__(self) -> None:
        self._chunks: list[Chunk] = []
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    @property
    def closed(self) -> bool:
        """Whether the stream ended (cleanly or not): the pump has nothing more to add."""
        return self._done

    def put(self, chunks: list[Chunk], done: bool, error: BaseException | None = None) -> None:
        """Add one round's chunks of this stream (called by the pump)."""
        if self._done:
            return
        self._chunks.extend(chunks)
        self._done = done or error is not None
        self._error = error
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> tuple[list[Chunk], bool]:
        """Wait for chunks or the end: ``(chunks, done)``; raises the stream's error once its chunks are taken."""
        while not self._chunks and not self._done:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        if self._chunks:
            chunks, self._chunks = self._chunks, []
            return chunks, self._done and self._error is None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return [], True


class ReplicaPump:
    """Pulls every stream a replica serves to this API process, one ``pull_many`` round at a time.

    ``add`` a stream once ``open_stream`` returned it, read its :class:`Inbox`, and ``discard`` it when the reader
    stops (at the end, or when the client left: the caller aborts the request in the model actor itself).
    """

    def __init__(
        self,
        ref: ReplicaRef,
        call: CallWrapper,
        *,
        timeout: float = 30.0,
        name: str = "the replica",
        on_timeout: Callable[[], None] | None = None,
    ) -> None:
        """``timeout``: the deadline of one round; ``name`` names the replica in the error of a round that missed
        it; ``on_timeout`` runs then (the route table stops sending new requests there for a while)."""
        self.ref = ref
        self._call = call
        self._timeout = timeout
        #: how long the model actor may wait for output before it answers an empty round: well inside the deadline
        self._wait = min(PULL_WAIT_SECONDS, timeout / 3)
        self._name = name
        self._on_timeout = on_timeout
        self._inboxes: dict[str, Inbox] = {}
        self._task: asyncio.Task[None] | None = None
        #: whether the round in flight includes every stream; a stream added meanwhile makes it stale
        self._round: set[str] = set()
        self._background: set[asyncio.Future[Any]] = set()
        #: rounds made so far (``pull_many`` calls); tests and diagnostics read it
        self.rounds = 0
        #: the replica's stream channel once connected; ``_channel_tried``: asked for it already (once per pump)
        self._channel: ChannelClient | None = None
        self._channel_tried = False

    @property
    def streams(self) -> int:
        return len(self._inboxes)

    def add(self, stream_id: str) -> Inbox:
        """Start pulling ``stream_id``; its chunks go to the returned inbox."""
        inbox = Inbox()
        self._inboxes[stream_id] = inbox
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif self._round and stream_id not in self._round:
            # A round is waiting without this stream: ask the model actor to end it, so the next one includes it
            # (otherwise the new stream's tokens would wait for one of the others to produce).
            self._round = set()
            task = asyncio.get_running_loop().create_task(self._wake())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return inbox

    def discard(self, stream_id: str) -> None:
        """Stop pulling ``stream_id`` (its chunks from a round still in flight are dropped)."""
        self._inboxes.pop(stream_id, None)

    async def _wake(self) -> None:
        try:
            await self._call(self.ref.wake_pulls())
        except Exception:  # noqa: BLE001 - the round then ends by itself (first output or its timeout)
            logger.debug("wake_pulls failed", exc_info=True)

    async def _run(self) -> None:
        try:
            while self._inboxes:
                ids = list(self._inboxes)
                self._round = set(ids)
                self.rounds += 1
                try:
                    pulled = await self._pull_round(ids)
                except Exception as exc:  # noqa: BLE001 - the whole round failed: its streams end with the error
                    for stream_id in ids:
                        inbox = self._inboxes.pop(stream_id, None)
                        if inbox is not None:
                            inbox.put([], True, exc)
                    continue
                finally:
                    self._round = set()
                for stream_id, (chunks, done, error) in pulled.items():
                    inbox = self._inboxes.get(stream_id)
                    if inbox is None:
                        continue  # its reader left meanwhile
                    inbox.put(chunks, done, error)
                    if inbox.closed:
                        del self._inboxes[stream_id]
        finally:
            # Cancelled (the API is stopping): no reader may wait forever on a pump that is gone.
            for inbox in self._inboxes.values():
                inbox.put([], True, EngineError("the stream relay of this replica stopped"))
            self._inboxes.clear()

    @property
    def on_channel(self) -> bool:
        """Whether rounds go over the replica's stream channel now (else over xoscar)."""
        return self._channel is not None

    async def _open_channel(self) -> None:
        """Ask the replica for its stream channel once and connect to it; on any failure rounds stay on xoscar."""
        self._channel_tried = True
        limit = self._wait
        try:
            where = await asyncio.wait_for(self.ref.stream_channel(), limit)
            if where is not None:
                self._channel = await asyncio.wait_for(ChannelClient.connect(*where), limit)
        except Exception as exc:  # noqa: BLE001 - another host, an older replica, no channel: xoscar carries it
            logger.debug("%s: no stream channel, rounds stay on xoscar (%s)", self._name, exc)

    def close(self) -> None:
        """Let go of the stream channel (the pump is being forgotten; it has no streams)."""
        self._drop_channel()

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def _pull_round(self, ids: list[str]) -> dict[str, Any]:
        """One round, within the deadline; past it, ReplicaUnreachable (and the streams are aborted)."""
        if not self._channel_tried:
            await self._open_channel()
        channel = self._channel
        call: asyncio.Future[dict[str, Any]]
        if channel is not None:
            call = asyncio.ensure_future(channel.pull_many(ids, self._wait))
        else:
            call = asyncio.ensure_future(self._call(self.ref.pull_many(ids, self._wait)))
        try:
            await asyncio.wait((call,), timeout=self._timeout)
        except asyncio.CancelledError:
            call.cancel()  # the pump itself is stopping (the API shuts down)
            raise
        if call.done():
            if channel is not None and isinstance(call.exception(), OSError):
                logger.debug("%s: the stream channel broke, rounds go on over xoscar", self._name)
                self._drop_channel()
                return await self._pull_round(ids)
            return call.result()
        self._drop_channel()  # its answer may still come, and would answer the wrong round
        self._leave(call)
        logger.warning(
            "%s did not answer a stream round for %.0fs: ending %d stream(s)", self._name, self._timeout, len(ids)
        )
        if self._on_timeout is not None:
            self._on_timeout()
        for stream_id in ids:
            if stream_id in self._inboxes:
                self._leave(asyncio.ensure_future(self._call(self.ref.abort(stream_id))))
        raise ReplicaUnreachable(f"{self._name} did not answer for {self._timeout:g} s; the stream was ended")

    def _leave(self, call: asyncio.Future[Any]) -> None:
        """Keep an actor call that nobody awaits until it ends by itself (its outcome no longer matters)."""
        self._background.add(call)
        call.add_done_callback(_forget(self._background))


def _forget(tasks: set[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    def done(call: asyncio.Future[Any]) -> None:
        tasks.discard(call)
        if not call.cancelled() and call.exception() is not None:
            logger.debug("a call left after a missed deadline failed: %s", call.exception())

    return done
