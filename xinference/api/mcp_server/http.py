"""The platform as an MCP server at ``/mcp`` (streamable HTTP), inside the API app.

The route sits behind the app's middleware like every other: a foreign ``Host`` or a cross-site ``Origin`` is
refused by :mod:`xinference.api.host_guard` and a missing or wrong key by :mod:`xinference.api.auth` before the
SDK sees the request (so the SDK's own DNS-rebinding check is left off: the host guard already applies this
server's rules). The transport is stateless: every POST is served on its own, so a client keeps working across a
restart of the server and nothing is held between calls.

A tool call runs in this process through the same services as the HTTP routes (:class:`LocalPlatform`), with the
same request models checking the arguments: no HTTP request to itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ValidationError
from starlette.datastructures import State
from starlette.routing import Route

from xinference.api.errors import validation_message
from xinference.api.mcp_server.tools import build_server
from xinference.api.openai.audio_files import check_upload, decode_audio, max_upload_bytes
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.api.openai.embeddings import EmbeddingRequest
from xinference.api.openai.rerank import RerankRequest
from xinference.api.openai.speech import SpeechRequest
from xinference.api.openai.transcriptions import TranscriptionForm
from xinference.errors import InvalidRequest

__all__ = ["MCP_PATH", "LocalPlatform", "attach_router", "serve_mcp"]

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


class _Endpoint:
    """ASGI app of ``/mcp``: hands each request to the session manager the app's lifespan runs."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        manager: StreamableHTTPSessionManager = scope["app"].state.mcp_sessions
        await manager.handle_request(scope, receive, send)


@contextlib.asynccontextmanager
async def serve_mcp(app: FastAPI) -> AsyncIterator[None]:
    """Run the ``/mcp`` server while the app runs (entered by the app's lifespan, after its services exist)."""
    server = build_server(LocalPlatform(app.state))
    # Only to make the session manager: the app it returns is not mounted (the route below serves the manager).
    server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_upload_bytes() * 4 // 3 + _BODY_OVERHEAD,
    )
    manager = server.session_manager
    app.state.mcp_sessions = manager
    async with manager.run():
        yield


def attach_router(app: FastAPI) -> None:
    """``GET``/``POST``/``DELETE /mcp`` (not in /openapi.json: it speaks JSON-RPC, described by MCP)."""
    app.router.routes.append(Route(MCP_PATH, endpoint=_Endpoint(), methods=["GET", "POST", "DELETE"]))
