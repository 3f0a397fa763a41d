"""``xinference mcp``: the platform's MCP tools over stdio, for MCP clients that only spawn commands.

The tools are the ones ``/mcp`` serves (:mod:`xinference.api.mcp_server.tools`); here they reach a running server
through :class:`xinference.client.AsyncClient`, with the endpoint and API key every command takes. stdout carries
the protocol, so nothing else is printed there; the SDK logs warnings to stderr. An MCP client's configuration::

    {"mcpServers": {"xinference": {"command": "xinference", "args": ["mcp", "-e", "http://127.0.0.1:9997"]}}}
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anyio
import click
from mcp.server.mcpserver.exceptions import ToolError

from xinference.api.mcp_server.tools import build_server
from xinference.cli.options import connection_options
from xinference.client import AsyncClient, AsyncRESTfulAudioModelHandle, ClientError

__all__ = ["COMMANDS", "ClientPlatform", "mcp"]


@contextlib.contextmanager
def _as_tool_error() -> Iterator[None]:
    """The server's error answer (its message names the field at fault) as the tool's error."""
    try:
        yield
    except ClientError as exc:
        raise ToolError(exc.message) from exc


class ClientPlatform:
    """The tools' platform over HTTP: each call is the route the tool mirrors, made with the Python client."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list_models(self) -> list[dict[str, Any]]:
        with _as_tool_error():
            return list((await self._client.list_models()).values())

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        with _as_tool_error():
            answer: dict[str, Any] = await self._client.chat_completion(body["model"], body["messages"], **params)
        return answer

    async def embed(self, body: dict[str, Any]) -> dict[str, Any]:
        params = {k: v for k, v in body.items() if k not in ("model", "input")}
        with _as_tool_error():
            return await self._client.embeddings(body["model"], body["input"], **params)

    async def rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        params = {k: v for k, v in body.items() if k not in ("model", "query", "documents")}
        with _as_tool_error():
            return await self._client.rerank(body["model"], body["query"], body["documents"], **params)

    async def _audio(self, model: str) -> AsyncRESTfulAudioModelHandle:
        handle = await self._client.get_model(model)
        if not isinstance(handle, AsyncRESTfulAudioModelHandle):
            raise ToolError(f"model {model!r} is not an audio model (see list_models)")
        return handle

    async def transcribe(self, fields: dict[str, Any], audio: bytes, filename: str) -> dict[str, Any]:
        # The client uploads the bytes under a name without a suffix: the server tells the format from the bytes.
        params = {k: v for k, v in fields.items() if k != "model"}
        with _as_tool_error():
            handle = await self._audio(fields["model"])
            answer = await handle.transcriptions(audio, **params)
        if not isinstance(answer, dict):
            raise ToolError("the server did not answer a JSON transcript")
        return answer

    async def speak(self, body: dict[str, Any]) -> bytes:
        params = {k: v for k, v in body.items() if k not in ("model", "input", "stream")}
        with _as_tool_error():
            handle = await self._audio(body["model"])
            audio = await handle.speech(body["input"], stream=False, **params)
        assert isinstance(audio, bytes)  # not streamed
        return audio


async def _serve(endpoint: str, api_key: str | None) -> None:
    async with AsyncClient(endpoint, api_key=api_key) as client:
        await build_server(ClientPlatform(client)).run_stdio_async()


@click.command("mcp")
@connection_options
def mcp(endpoint: str, api_key: str | None) -> None:
    """Serve the server's models as MCP tools over stdio (list_models, chat, embed, rerank, transcribe, speak)."""
    anyio.run(_serve, endpoint, api_key)


COMMANDS = (mcp,)
