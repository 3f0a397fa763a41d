"""The platform's own MCP tools: list the running models, chat with one, embed, rerank, transcribe and speak.

The same tools are served two ways, so they are written once here over a :class:`Platform` (what the tools need
from the platform):

- at ``/mcp`` of the API itself (streamable HTTP, :mod:`xinference.api.mcp_server.http`), where the platform is the
  API process's own services: a tool call takes the same code path as the HTTP route it mirrors;
- by ``xinference mcp`` over stdio (:mod:`xinference.cli.mcp`), where the platform is a running server reached
  with :class:`xinference.client.AsyncClient`, for MCP clients that only spawn commands.

Each tool takes the fields of the HTTP request it mirrors (``model``, ``input``, ...), checked by the same request
models, so a bad argument is a tool error naming the field, as the route's 400 would be. Errors reach the calling
model as ``is_error`` results, never as protocol errors. Audio crosses as base64: MCP messages are JSON.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import AudioContent, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from xinference import __version__
from xinference.errors import XinferenceError

__all__ = ["AUDIO_MIME_TYPES", "ChatMessage", "Platform", "build_server"]

#: The media type of each audio format ``speak`` can return (OpenAI's ``response_format`` values).
AUDIO_MIME_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}

_INSTRUCTIONS = (
    "Tools of an Xinference server: call list_models first to see which models run (their uid is the 'model' "
    "argument of every other tool), then chat with an LLM, embed texts with an embedding model, rerank documents "
    "with a rerank model, transcribe audio with a speech-to-text model or speak a text with a text-to-speech one."
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class ChatMessage(BaseModel):
    """One turn of a conversation given to ``chat``."""

    role: Literal["system", "user", "assistant"]
    content: str


class Platform(Protocol):
    """What the tools need from the platform; each call takes the JSON body of the HTTP route it mirrors and
    returns that route's answer. Failures raise :class:`~xinference.errors.XinferenceError` (or
    :class:`ToolError` with a message ready for the model)."""

    async def list_models(self) -> list[dict[str, Any]]:
        """The entries of ``GET /v1/models``."""
        ...

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/chat/completions``, not streamed."""
        ...

    async def embed(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/embeddings``."""
        ...

    async def rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/rerank``."""
        ...

    async def transcribe(self, fields: dict[str, Any], audio: bytes, filename: str) -> dict[str, Any]:
        """``POST /v1/audio/transcriptions`` with the form ``fields`` and the file; its ``json`` answer."""
        ...

    async def speak(self, body: dict[str, Any]) -> bytes:
        """``POST /v1/audio/speech`` answered whole: the audio file's bytes."""
        ...


def _some(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _json_result(structured: dict[str, Any]) -> CallToolResult:
    """A result whose text is the JSON of ``structured`` (what clients without structured content read)."""
    text = json.dumps(structured, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _model_summary(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": entry.get("id") or entry.get("model_uid"),
        "model_name": entry.get("model_name"),
        "model_type": entry.get("model_type"),
        "abilities": entry.get("abilities") or entry.get("model_ability") or [],
        "status": entry.get("status"),
        "engine": entry.get("model_engine") or entry.get("engine"),
        "context_length": entry.get("context_length"),
    }


def _decode_base64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError("audio_base64 is not valid base64 (send the file's bytes, base64 encoded)") from None


class _Tools:
    """The tool functions, bound to one platform (their signatures are the tools' input schemas)."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    async def list_models(self) -> CallToolResult:
        """The models running on this Xinference server: id (the 'model' argument of the other tools), name,
        type (LLM, embedding, rerank, audio), abilities and status."""
        entries = await self.platform.list_models()
        return _json_result({"models": [_model_summary(e) for e in entries]})

    async def chat(
        self,
        model: Annotated[str, Field(description="id of a running LLM with the chat ability (see list_models)")],
        prompt: Annotated[str | None, Field(description="the user's message; or give messages instead")] = None,
        messages: Annotated[
            list[ChatMessage] | None, Field(description="the whole conversation, oldest first (instead of prompt)")
        ] = None,
        system: Annotated[str | None, Field(description="a system prompt put before the conversation")] = None,
        max_tokens: Annotated[int | None, Field(ge=1, description="most tokens to generate")] = None,
        temperature: Annotated[float | None, Field(ge=0, le=2, description="sampling temperature")] = None,
    ) -> CallToolResult:
        """Ask a chat model running on this server and get its answer."""
        if (prompt is None) == (messages is None):
            raise ToolError("give either prompt (one user message) or messages (a conversation), not both")
        turns = [m.model_dump() for m in messages] if messages is not None else [{"role": "user", "content": prompt}]
        if system is not None:
            turns.insert(0, {"role": "system", "content": system})
        body = {"model": model, "messages": turns, **_some(max_tokens=max_tokens, temperature=temperature)}
        answer = await self.platform.chat(body)
        choice = (answer.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        structured = {
            "model": answer.get("model", model),
            "content": text,
            "finish_reason": choice.get("finish_reason"),
            "usage": answer.get("usage"),
        }
        if message.get("reasoning_content"):
            structured["reasoning_content"] = message["reasoning_content"]
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    async def embed(
        self,
        model: Annotated[str, Field(description="id of a running embedding model (see list_models)")],
        input: Annotated[str | list[str], Field(description="a text, or a list of texts")],
        dimensions: Annotated[int | None, Field(ge=1, description="shorten vectors to this size")] = None,
    ) -> CallToolResult:
        """Embed texts with an embedding model: one vector per text, in input order."""
        answer = await self.platform.embed({"model": model, "input": input, **_some(dimensions=dimensions)})
        vectors = [item["embedding"] for item in sorted(answer.get("data") or [], key=lambda item: item["index"])]
        return _json_result(
            {
                "model": answer.get("model", model),
                "dimensions": len(vectors[0]) if vectors else 0,
                "embeddings": vectors,
                "usage": answer.get("usage"),
            }
        )

    async def rerank(
        self,
        model: Annotated[str, Field(description="id of a running rerank model (see list_models)")],
        query: Annotated[str, Field(description="what the documents are ranked against")],
        documents: Annotated[list[str], Field(min_length=1, description="the texts to rank")],
        top_n: Annotated[int | None, Field(ge=1, description="keep only the best top_n")] = None,
    ) -> CallToolResult:
        """Order documents by relevance to a query, best first, with their scores."""
        body = {"model": model, "query": query, "documents": documents, "return_documents": True}
        answer = await self.platform.rerank({**body, **_some(top_n=top_n)})
        results = [
            {
                "index": item["index"],
                "relevance_score": item["relevance_score"],
                "document": documents[item["index"]],
            }
            for item in answer.get("results") or []
        ]
        return _json_result({"model": answer.get("model", model), "results": results})

    async def transcribe(
        self,
        model: Annotated[str, Field(description="id of a running speech-to-text model (see list_models)")],
        audio_base64: Annotated[str, Field(min_length=1, description="the audio file's bytes, base64 encoded")],
        filename: Annotated[
            str, Field(min_length=1, description="the file's name; its suffix tells the format (wav, mp3, ...)")
        ] = "audio.wav",
        language: Annotated[str | None, Field(description="spoken language (ISO-639-1); detected if left out")] = None,
        prompt: Annotated[str | None, Field(description="text that guides the transcript's style")] = None,
    ) -> CallToolResult:
        """The words spoken in an audio file (wav, mp3, m4a, ogg, webm, flac, ...)."""
        audio = _decode_base64(audio_base64)
        fields = {"model": model, "response_format": "json", **_some(language=language, prompt=prompt)}
        answer = await self.platform.transcribe(fields, audio, filename)
        text = str(answer.get("text", ""))
        structured = {"model": model, "text": text, "usage": answer.get("usage")}
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    async def speak(
        self,
        model: Annotated[str, Field(description="id of a running text-to-speech model (see list_models)")],
        text: Annotated[str, Field(min_length=1, max_length=4096, description="what to say")],
        voice: Annotated[str | None, Field(description="one of the model's voices; its default if left out")] = None,
        format: Annotated[
            Literal["mp3", "opus", "aac", "flac", "wav", "pcm"], Field(description="the audio file's format")
        ] = "wav",
        speed: Annotated[float, Field(ge=0.25, le=4.0, description="1.0 is the voice's own pace")] = 1.0,
    ) -> CallToolResult:
        """Speak a text with a text-to-speech model; returns the audio (base64) in the format asked for."""
        body = {"model": model, "input": text, "response_format": format, "speed": speed, "stream": False}
        audio = await self.platform.speak({**body, **_some(voice=voice)})
        encoded = base64.b64encode(audio).decode("ascii")
        mime = AUDIO_MIME_TYPES[format]
        return CallToolResult(
            content=[AudioContent(type="audio", data=encoded, mime_type=mime)],
            structured_content={"model": model, "format": format, "mime_type": mime, "bytes": len(audio)},
        )


def _tool_errors(fn: Any) -> Any:
    """``fn`` with the platform's errors turned into tool errors: the calling model reads the message (the 4xx
    the HTTP route would have answered), and the server logs it as expected, not as a crash."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except XinferenceError as exc:
            raise ToolError(exc.message) from exc

    return wrapper


def build_server(platform: Platform, name: str = "xinference") -> MCPServer[Any]:
    """An MCP server offering the platform's tools, over ``platform``."""
    server: MCPServer[Any] = MCPServer(name, version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING")
    tools = _Tools(platform)
    server.add_tool(_tool_errors(tools.list_models), name="list_models", annotations=_READ_ONLY)
    server.add_tool(_tool_errors(tools.chat), name="chat")
    server.add_tool(_tool_errors(tools.embed), name="embed", annotations=_READ_ONLY)
    server.add_tool(_tool_errors(tools.rerank), name="rerank", annotations=_READ_ONLY)
    server.add_tool(_tool_errors(tools.transcribe), name="transcribe")
    server.add_tool(_tool_errors(tools.speak), name="speak")
    return server
