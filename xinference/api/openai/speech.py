"""``POST /v1/audio/speech`` (OpenAI's shape) and the voices a text-to-speech model offers.

The request is checked here (text present and within :data:`MAX_SPEECH_CHARS`, a known format, a speed OpenAI
accepts) and by the engine before the first byte (the voice), so bad input is a 4xx naming the field. The audio
comes back three ways:

- streamed (the default, as OpenAI does): the bytes of each sentence leave as soon as the model process has
  encoded them, over a chunked response with the format's Content-Type; a streamed ``wav`` says "unknown length"
  in its header;
- whole (``stream: false``, an extension): one body with its Content-Length;
- ``stream_format: "sse"``: server-sent events ``speech.audio.delta`` (base64 audio) and a closing
  ``speech.audio.done`` carrying ``usage`` (here counted in characters of input: these engines have no tokens).

A failure after the first byte ends an audio stream early (the client sees a short file and a broken chunked
transfer) and an SSE stream with an ``error`` event. A client that leaves makes the model process stop at its next
sentence. No engine, torch or xoscar imports here.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any, AsyncIterator, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import Field, field_validator

from xinference.api.errors import error_frame
from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import Replica, Route, RouteTable, model_call
from xinference.api.openai.embeddings import check_model_type
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.api.sse import encode_frames
from xinference.engines.base import Chunk, chunk_dicts
from xinference.errors import EngineError, XinferenceError

__all__ = ["CONTENT_TYPES", "MAX_SPEECH_CHARS", "SpeechRequest", "SpeechService", "VoiceList", "attach_router"]

logger = logging.getLogger(__name__)

#: OpenAI's limit on ``input``.
MAX_SPEECH_CHARS = 4096

CONTENT_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}


# -- protocol ----------------------------------------------------------------------------------------------------------
class SpeechRequest(OpenAIRequest):
    """``POST /v1/audio/speech``."""

    model: str = Field(min_length=1)
    input: str = Field(max_length=MAX_SPEECH_CHARS)
    voice: str | None = Field(default=None, description="one of the model's voices; OpenAI's names mean its default")
    instructions: str | None = Field(default=None, description="accepted; the CPU voices cannot follow them")
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    # -- extensions: stream=false answers one whole file; keep_alive as Ollama's
    stream: bool = True
    keep_alive: str | int | float | None = None

    @field_validator("input")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input is empty: give the text to speak")
        return value

    @field_validator("voice", mode="before")
    @classmethod
    def _voice(cls, value: Any) -> Any:
        # OpenAI's newer SDKs may send a voice as {"id": ...}
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            return value["id"]
        return value

    def to_engine_params(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "voice": self.voice,
            "instructions": self.instructions,
            "response_format": self.response_format,
            "speed": self.speed,
        }


class Voice(ResponseBody):
    id: str
    name: str
    language: str = ""


class VoiceList(ResponseBody):
    """``GET /v1/audio/voices?model=...``: the model's voices, its default first."""

    object: Literal["list"]
    model: str
    data: list[Voice]


# -- serving -----------------------------------------------------------------------------------------------------------
class SpeechService:
    """Runs speech requests against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes
        self._background: set[asyncio.Task[Any]] = set()

    async def _route(self, model: str) -> Route:
        route = await self._routes.get(model)
        check_model_type(route, "audio", "text2audio", "text-to-speech")
        return route

    async def voices(self, model: str) -> dict[str, Any]:
        route = await self._route(model)
        voices, _ = await self._routes.call(route, lambda replica: replica.ref.voices())
        return {"object": "list", "model": route.model_uid, "data": voices}

    async def whole(self, body: SpeechRequest) -> bytes:
        route = await self._route(body.model)
        note_keep_alive(self._routes, route, body.keep_alive)
        params = body.to_engine_params()
        audio, _ = await self._routes.call(route, lambda replica: replica.ref.speech(params))
        return audio

    async def open(self, body: SpeechRequest) -> AsyncIterator[bytes]:
        """Start a streamed synthesis (errors before the first byte are raised here); returns its audio bytes."""
        route = await self._route(body.model)
        note_keep_alive(self._routes, route, body.keep_alive)
        ticket, route = await self._routes.admit(route)
        params = body.to_engine_params()
        try:
            opened, replica = await self._routes.call(route, lambda r: r.ref.open_stream("speech", params), ticket)
        except BaseException as exc:
            ticket.fail(exc)
            ticket.leave()
            raise
        stream_id, first, done = opened
        replica.outstanding += 1
        ticket.streamed = True
        return self._pieces(route.model_uid, replica, stream_id, first, done, ticket)

    async def _pieces(
        self, uid: str, replica: Replica, stream_id: str, batch: list[Chunk], done: bool, ticket: Any
    ) -> AsyncIterator[bytes]:
        finished = done
        try:
            while True:
                data = b"".join(chunk["audio"] for chunk in chunk_dicts(batch))
                if data:
                    if ticket.first_token is None:
                        ticket.mark_first_token()
                    yield data
                if done:
                    break
                batch, done = await model_call(self._routes, uid, replica.ref.pull(stream_id))
            finished = True
        except (GeneratorExit, asyncio.CancelledError) as exc:
            ticket.fail(exc)
            raise
        except BaseException as exc:
            ticket.fail(exc)
            finished = True  # the model actor already dropped the failed stream
            raise
        finally:
            replica.outstanding -= 1
            ticket.leave()
            if not finished:
                task = asyncio.get_running_loop().create_task(replica.ref.abort(stream_id))
                self._background.add(task)
                task.add_done_callback(self._background.discard)


async def _audio_body(pieces: AsyncIterator[bytes], uid: str) -> AsyncIterator[bytes]:
    try:
        async for piece in pieces:
            yield piece
    except Exception:
        logger.exception("a speech stream of %s failed after its first bytes", uid)
        raise


async def _sse_body(pieces: AsyncIterator[bytes], uid: str, characters: int) -> AsyncIterator[bytes]:
    try:
        async for piece in pieces:
            yield encode_frames([{"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode("ascii")}])
        usage = {"input_tokens": characters, "output_tokens": 0, "total_tokens": characters}
        yield encode_frames([{"type": "speech.audio.done", "usage": usage}])
    except XinferenceError as exc:
        yield error_frame(exc)
    except Exception as exc:  # noqa: BLE001 - never leave a client without a closing event
        logger.exception("a speech stream of %s failed", uid)
        yield error_frame(EngineError(f"the stream failed: {type(exc).__name__}"))


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> SpeechService:
    service: SpeechService = request.app.state.speech
    return service


@router.post(
    "/v1/audio/speech",
    response_class=Response,
    responses={200: {"content": {ctype: {} for ctype in CONTENT_TYPES.values()} | {"text/event-stream": {}}}},
)
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    service = _service(request)
    media_type = CONTENT_TYPES[body.response_format]
    if body.stream_format == "sse":
        pieces = await service.open(body)
        return StreamingResponse(_sse_body(pieces, body.model, len(body.input)), media_type="text/event-stream")
    if not body.stream:
        return Response(await service.whole(body), media_type=media_type)
    pieces = await service.open(body)
    return StreamingResponse(_audio_body(pieces, body.model), media_type=media_type)


@router.get("/v1/audio/voices", response_model=VoiceList)
async def list_voices(request: Request, model: str = Query(min_length=1)) -> JSONResponse:
    return JSONResponse(await _service(request).voices(model))


@router.get("/v1/models/{model_uid}/voices", response_model=VoiceList)
async def model_voices(model_uid: str, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).voices(model_uid))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
