"""What ``/v1/chat/completions`` and ``/v1/completions`` do.

Validation and the model lookup happen before the first byte, so a bad request still gets its proper status
code; once a stream has started, a failure is sent as an error frame followed by ``[DONE]``, and so is a stream
the platform ended (an unload, a scale-down, a restart, a replica that stopped answering: the error names which),
so a cut answer never ends like a whole one. A client that goes
away mid-stream makes the model actor abort the request, which frees the engine's slot. The chunks of every
stream open on one replica are pulled by that replica's pump (:mod:`xinference.api.gateway.pump`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Sequence
from typing import Any, AsyncIterator, Literal, Union, cast

from xinference import settings
from xinference.api.errors import error_frame
from xinference.api.gateway.admission import Ticket
from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.pump import ReplicaPump
from xinference.api.gateway.requests import RunningRequests
from xinference.api.gateway.routes import Replica, Route, RouteTable, model_call
from xinference.api.images import inline_images
from xinference.api.mcp.loop import ToolSet
from xinference.api.mcp.manager import McpHub
from xinference.api.metrics import observe_batch, with_usage
from xinference.api.openai.chat.mcp_tools import complete_with_tools, request_tools, stream_with_tools
from xinference.api.openai.chat.protocol import ChatCompletionRequest, CompletionRequest
from xinference.api.sse import DONE_FRAME, encode_frames
from xinference.engines.base import Chunk, chunk_dicts
from xinference.errors import EngineError, InvalidRequest, WrongModelType, XinferenceError
from xinference.model.images import image_parts

__all__ = ["GenerationService"]

logger = logging.getLogger(__name__)

Kind = Literal["chat", "completions"]
_NEEDS = {"chat": "chat", "completions": "generate"}


class GenerationService:
    """Runs chat and text completions against the model actors found through the route table."""

    def __init__(self, routes: RouteTable, requests: RunningRequests | None = None, mcp: McpHub | None = None) -> None:
        self._routes = routes
        #: the MCP servers chat requests may name (``mcp_servers``); None where the app runs none
        self.mcp = mcp
        #: requests sent with a ``request_id``, which ``abort_request`` stops
        self.requests = requests if requests is not None else RunningRequests()
        self._background: set[asyncio.Task[Any]] = set()
        #: one pump per replica address, made with the replica's first stream and kept while it is routed
        self._pumps: dict[str, ReplicaPump] = {}

    async def create(
        self, kind: Kind, body: Union[ChatCompletionRequest, CompletionRequest]
    ) -> dict[str, Any] | AsyncIterator[bytes]:
        """A full response dict, or an async iterator of SSE bytes when ``body.stream`` is set."""
        params = body.to_engine_params()
        if kind == "chat":
            await self.prepare_images(body.model, params["messages"])
        # Registered before any work starts: an id aborted a moment ago is refused here.
        entry = self.requests.start(body.model, body.request_id) if body.request_id is not None else None
        try:
            tools = await self._mcp_tools(body, params) if isinstance(body, ChatCompletionRequest) else None
            if tools is not None and isinstance(body, ChatCompletionRequest):
                if not body.stream:
                    return await self.requests.run(entry, complete_with_tools(self, body, params, tools))
                batches: AsyncIterator[list[Chunk]] = cast(
                    AsyncIterator[list[Chunk]], await stream_with_tools(self, body, params, tools)
                )
            elif not body.stream:
                return await self.requests.run(entry, self.complete(kind, body.model, params, body.keep_alive))
            else:  # the plain relay: chunks an engine passed as JSON text are written without a decode
                batches = await self._open(kind, body.model, params, body.keep_alive, decode=False)
        except BaseException:
            if entry is not None:
                self.requests.finish(entry)
            raise
        return self._relay(body.model, self.requests.stream(entry, batches))

    async def _mcp_tools(self, body: ChatCompletionRequest, params: dict[str, Any]) -> ToolSet | None:
        """The MCP tools this chat request offers its model (see ``mcp_tools.py``), or None."""
        if body.mcp_servers is None and (self.mcp is None or not self.mcp.names() or params.get("tools")):
            return None  # the common case: no route lookup
        launch_servers = None
        if body.mcp_servers is None:
            launch_servers = (await self.route(body.model, "chat")).limits.get("mcp_servers")
        return await request_tools(self.mcp, body, params, launch_servers)

    async def route(self, model: str, kind: Kind) -> Route:
        """The route of ``model``, checked to serve ``kind`` (404 / 400 otherwise)."""
        route = await self._routes.get(model)
        self._check_ability(route, kind)
        return route

    async def prepare_images(
        self, model: str, messages: list[dict[str, Any]], names: Sequence[str] | None = None
    ) -> None:
        """Make the images of ``messages`` ready for the engine (:func:`~xinference.api.images.inline_images`: each
        checked, each URL fetched and replaced by a ``data:`` URI, in place), after refusing images to a model
        without the vision ability. ``names`` are the client's own paths of the images a translated API (Messages,
        Responses) added, for its errors; shared by every API whose requests can carry images."""
        parts = list(image_parts(messages))
        if not parts:
            return
        first = names[0] if names else parts[0].param
        route = await self.route(model, "chat")
        if "vision" not in route.model_ability:
            raise InvalidRequest(
                f"model {model!r} cannot read images (its abilities are {', '.join(route.model_ability)}); send "
                "text only, or use a model with the vision ability",
                param=first,
            )
        await inline_images(messages, names)

    async def complete(self, kind: Kind, model: str, params: dict[str, Any], keep_alive: Any = None) -> dict[str, Any]:
        """One whole response for engine ``params``; other APIs (Messages, Responses) translate to and from this.
        ``keep_alive`` is the request's own (Ollama's field, see :mod:`xinference.api.gateway.keep_alive`)."""
        route = await self.route(model, kind)
        note_keep_alive(self._routes, route, keep_alive)
        method = "chat" if kind == "chat" else "completions"
        result, _ = await self._routes.call(route, lambda r: getattr(r.ref, method)(params))
        return result  # type: ignore[no-any-return]

    async def open(
        self, kind: Kind, model: str, params: dict[str, Any], keep_alive: Any = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Start a stream and return its chunks in batches (errors before the first chunk are raised here);
        ``keep_alive`` as in :meth:`complete`. Every chunk is a dict here (decoded in this process when the engine
        passed it as JSON text), for the consumers that read fields: the Messages and Responses translations, the
        MCP tool loop.

        Close the iterator (``contextlib.aclosing``) when the consumer stops early: the model actor is then told to
        abort, which frees the engine's slot.
        """
        batches = await self._open(kind, model, params, keep_alive, decode=True)
        return cast(AsyncIterator[list[dict[str, Any]]], batches)

    async def _open(
        self, kind: Kind, model: str, params: dict[str, Any], keep_alive: Any, decode: bool
    ) -> AsyncIterator[list[Chunk]]:
        """:meth:`open`; with ``decode`` False, chunks the engine passed as JSON text stay bytes (the plain relay)."""
        route = await self.route(model, kind)
        note_keep_alive(self._routes, route, keep_alive)
        ticket, route = await self._routes.admit(route)  # held until the stream ends (admission, metrics)
        wanted_usage, params = with_usage(params)  # usage counts the tokens; dropped again if not asked for
        try:
            opened, replica = await self._routes.call(route, lambda r: r.ref.open_stream(kind, params), ticket)
        except BaseException as exc:
            ticket.fail(exc)
            ticket.leave()
            raise
        stream_id, batch, done = opened
        replica.outstanding += 1  # given back by _Release when the stream ends, or when its iterator is dropped
        ticket.streamed = True
        release = _Release(self, replica, stream_id, ticket)
        batches = self._batches(route.model_uid, replica, stream_id, batch, done, ticket, wanted_usage, release, decode)
        # An iterator dropped before its first read never runs its ``finally``: the finalizer gives back its
        # replica slot and admission ticket then, and aborts the request in the engine.
        weakref.finalize(batches, release, False)
        return batches

    @staticmethod
    def _check_ability(route: Route, kind: Kind) -> None:
        needed = _NEEDS[kind]
        if route.model_type != "LLM" or needed not in route.model_ability:
            what = "chat completions" if kind == "chat" else "text completions"
            raise WrongModelType(
                f"model {route.model_uid!r} is a {route.model_type} model with abilities "
                f"{', '.join(route.model_ability)}; it cannot serve {what}",
                param="model",
            )

    async def _batches(
        self,
        uid: str,
        replica: Replica,
        stream_id: str,
        batch: list[Chunk],
        done: bool,
        ticket: Ticket,
        wanted_usage: bool,
        release: _Release,
        decode: bool,
    ) -> AsyncIterator[list[Chunk]]:
        finished = done
        pump = self._pump(uid, replica) if not done else None
        inbox = pump.add(stream_id) if pump is not None else None
        try:
            batch = observe_batch(ticket, batch, wanted_usage)
            yield cast(list[Chunk], chunk_dicts(batch)) if decode else batch
            while not done and inbox is not None:
                batch, done = await inbox.get()
                if batch:
                    batch = observe_batch(ticket, batch, wanted_usage)
                    if batch:
                        yield cast(list[Chunk], chunk_dicts(batch)) if decode else batch
            finished = True
        except (GeneratorExit, asyncio.CancelledError) as exc:
            ticket.fail(exc)
            raise  # the consumer left: abort below
        except BaseException as exc:
            ticket.fail(exc)
            finished = True  # the stream failed in the model actor, which already dropped it
            raise
        finally:
            if pump is not None:
                pump.discard(stream_id)
            release(finished)

    def _pump(self, uid: str, replica: Replica) -> ReplicaPump:
        """The pump of ``replica``; a new one when its address has none yet or its model process was replaced."""
        pump = self._pumps.get(replica.address)
        if pump is None or pump.ref is not replica.ref:
            # pumps without streams hold only a ref and a channel: drop them, so replicas long gone are forgotten
            for address, old in list(self._pumps.items()):
                if not old.streams:
                    old.close()
                    del self._pumps[address]
            routes = self._routes

            def unanswered() -> None:  # new requests go to the model's other replicas meanwhile, if it has any
                routes.mark_unreachable(replica.address)
                routes.invalidate()

            pump = ReplicaPump(
                replica.ref,
                lambda call: model_call(routes, uid, call),
                timeout=settings.stream_pull_timeout(),
                name=f"replica {replica.address} of model {uid!r}",
                on_timeout=unanswered,
            )
            self._pumps[replica.address] = pump
        return pump

    async def _relay(self, uid: str, batches: AsyncIterator[list[Chunk]]) -> AsyncIterator[bytes]:
        async with contextlib.aclosing(batches):  # type: ignore[type-var]
            try:
                async for batch in batches:
                    yield encode_frames(batch)
                yield DONE_FRAME
            except XinferenceError as exc:
                yield error_frame(exc)
                yield DONE_FRAME
            except Exception as exc:  # noqa: BLE001 - never leave a client hanging without a closing frame
                logger.exception("a stream of %s failed", uid)
                yield error_frame(EngineError(f"the stream failed: {type(exc).__name__}"))
                yield DONE_FRAME

    def _abort_later(self, replica: Replica, stream_id: str) -> None:
        """The client left: tell the model actor, from a task of its own (this one is being cancelled)."""
        task = asyncio.get_running_loop().create_task(replica.ref.abort(stream_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _Release:
    """Gives a stream's replica slot and admission ticket back exactly once (at its end, or when its iterator is
    dropped unread), and asks the model actor to abort the request when it did not finish."""

    def __init__(self, service: GenerationService, replica: Replica, stream_id: str, ticket: Ticket) -> None:
        self._service = service
        self._replica = replica
        self._stream_id = stream_id
        self._ticket = ticket
        self._loop = asyncio.get_running_loop()
        self._done = False

    def __call__(self, finished: bool) -> None:
        if self._done:
            return
        self._done = True
        self._replica.outstanding -= 1
        self._ticket.leave()
        if not finished and not self._loop.is_closed():
            # may run from a garbage-collector finalizer: schedule the abort on the loop rather than here
            self._loop.call_soon_threadsafe(self._service._abort_later, self._replica, self._stream_id)
