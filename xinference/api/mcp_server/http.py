"""The platform as an MCP server at ``/mcp`` (streamable HTTP), inside the API app.

The route sits behind the app's middleware like every other: a foreign ``Host`` or a cross-site ``Origin`` is
refused by :mod:`xinference.api.host_guard` and a missing or wrong key by :mod:`xinference.api.auth` before the
SDK sees the request (so the SDK's own DNS-rebinding check is left off: the host guard already applies this
server's rules). The transport is stateless: every POST is served on its own, so a client keeps working across a
restart of the server and nothing is held between calls.

A tool call runs in this process through the same services as the HTTP routes (:class:`LocalPlatform`), with the
same request models checking the arguments: no HTTP request to itself.

The SDK (``mcp``, ~0.4 s of CPU and ~23 MiB) is not imported when the app starts: the first request to ``/mcp``
imports it in a worker thread, builds the server and starts its session manager in a task of its own, which the
app's lifespan stops at shutdown. Later requests go straight to the running manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from typing import TYPE_CHECKING, Any, AsyncIterator

from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from starlette.datastructures import State
from starlette.routing import Route

from xinference.api.errors import validation_message
from xinference.api.openai.audio_files import check_upload, decode_audio, max_upload_bytes
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.api.openai.embeddings import EmbeddingRequest
from xinference.api.openai.rerank import RerankRequest
from xinference.api.openai.speech import SpeechRequest
from xinference.api.openai.transcriptions import TranscriptionForm
from xinference.errors import InvalidRequest

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["MCP_PATH", "LocalPlatform", "McpServerRunner", "attach_router", "serve_mcp"]

#: Where the platform's MCP server answers.
MCP_PATH = "/mcp"
#: A JSON-RPC message may carry an audio file as base64 (4/3 of its size) plus the rest of the call.
_BODY_OVERHEAD = 1024 * 1024


def _parse(model: type[BaseModel], body: dict[str, Any]) -> Any:
    """``body`` checked by the HTTP route's request model; InvalidRequest naming the field as the route's 400."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        message, field = validation_message(list(exc.errors()))
        raise InvalidRequest(message, param=field) from None


class LocalPlatform:
    """The tools' platform inside the API process: the services ``create_app`` puts on ``app.state``."""

    def __init__(self, state: State) -> None:
        self._state = state

    async def list_models(self) -> list[dict[str, Any]]:
        listed: dict[str, Any] = await self._state.models.list()
        return list(listed["data"])

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        request = _parse(ChatCompletionRequest, {**body, "stream": False})
        answer = await self._state.generation.create("chat", request)
        assert isinstance(answer, dict)  # not streamed
        return answer

    async def embed(self, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = await self._state.embeddings.create(_parse(EmbeddingRequest, body))
        return answer

    async def rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = await self._state.rerank.create(_parse(RerankRequest, body))
        return answer

    async def transcribe(self, fields: dict[str, Any], audio: bytes, filename: str) -> dict[str, Any]:
        form = _parse(TranscriptionForm, fields)
        check_upload(filename, len(audio))
        decoded = await asyncio.to_thread(decode_audio, audio, filename)
        result: dict[str, Any] = await self._state.transcriptions.whole(form, decoded.samples, "transcribe")
        return result

    async def speak(self, body: dict[str, Any]) -> bytes:
        audio: bytes = await self._state.speech.whole(_parse(SpeechRequest, body))
        return audio


class McpServerRunner:
    """The ``/mcp`` server, started by the first request that needs it and stopped with the app.

    The SDK's session manager runs a task group that must be entered and left by one task: :meth:`_run` owns it
    from the first request until :meth:`aclose`."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._manager: StreamableHTTPSessionManager | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._closed = False

    @property
    def started(self) -> bool:
        return self._task is not None

    async def manager(self) -> StreamableHTTPSessionManager:
        """The running session manager (started now when this is the first call)."""
        if self._manager is not None:
            return self._manager
        async with self._lock:
            if self._manager is None:
                if self._closed:
                    raise RuntimeError("the MCP server is stopped: the API is shutting down")
                await asyncio.to_thread(importlib.import_module, "xinference.api.mcp_server.tools")
                ready: asyncio.Future[StreamableHTTPSessionManager] = asyncio.get_running_loop().create_future()
                self._task = asyncio.create_task(self._run(ready), name="mcp server")
                # shielded: a request that goes away while the server starts leaves it starting for the next one
                self._manager = await asyncio.shield(ready)
        return self._manager

    async def _run(self, ready: asyncio.Future[StreamableHTTPSessionManager]) -> None:
        try:
            manager = _session_manager(LocalPlatform(self._state))
            async with manager.run():
                ready.set_result(manager)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def aclose(self) -> None:
        """Stop the server (when it was started) and refuse to start it again."""
        self._closed = True
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(BaseException):
                await task


def _session_manager(platform: LocalPlatform) -> StreamableHTTPSessionManager:
    from mcp.server.transport_security import TransportSecuritySettings

    from xinference.api.mcp_server.tools import build_server

    server = build_server(platform)
    # Only to make the session manager: the app it returns is not mounted (the route below serves the manager).
    server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_upload_bytes() * 4 // 3 + _BODY_OVERHEAD,
    )
    return server.session_manager


class _Endpoint:
    """ASGI app of ``/mcp``: hands each request to the session manager (started by the first request)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        runner: McpServerRunner = scope["app"].state.mcp_server
        manager = await runner.manager()
        await manager.handle_request(scope, receive, send)


@contextlib.asynccontextmanager
async def serve_mcp(app: FastAPI) -> AsyncIterator[None]:
    """Make ``/mcp`` servable while the app runs (entered by the app's lifespan, after its services exist); the
    server starts with its first request and stops here."""
    runner = McpServerRunner(app.state)
    app.state.mcp_server = runner
    try:
        yield
    finally:
        await runner.aclose()


def attach_router(app: FastAPI) -> None:
    """``GET``/``POST``/``DELETE /mcp`` (not in /openapi.json: it speaks JSON-RPC, described by MCP)."""
    app.router.routes.append(Route(MCP_PATH, endpoint=_Endpoint(), methods=["GET", "POST", "DELETE"]))
