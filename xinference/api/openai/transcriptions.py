"""``POST /v1/audio/transcriptions`` and ``/v1/audio/translations`` (OpenAI's shapes): the form, the service, the
response formats and the routes.

The request is multipart (``file`` plus form fields), parsed here rather than by FastAPI's form binding so that an
upload over the limit is refused from its ``Content-Length`` before it is read, and each missing or malformed field
is a 400 naming it. The file is decoded on a thread (:mod:`.audio_files`); the model actor gets float32 samples.
``response_format`` picks the body: ``json`` and ``verbose_json`` (JSON), ``text``, ``srt`` and ``vtt`` (plain
text). ``stream=true`` (transcriptions) answers server-sent events: ``transcript.text.delta`` per recognised
segment, then ``transcript.text.done`` with the whole text. No engine, torch or xoscar imports here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Any, AsyncIterator, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import Field, ValidationError, field_validator
from starlette.datastructures import UploadFile

from xinference.api.errors import error_frame, validation_message
from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import Replica, Route, RouteTable
from xinference.api.openai.audio_files import check_upload, decode_audio, max_upload_bytes
from xinference.api.openai.embeddings import check_model_type
from xinference.api.openai.multipart import open_form
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.api.sse import encode_frames
from xinference.engines.base import Chunk, chunk_dicts
from xinference.errors import EngineError, InvalidRequest, XinferenceError

__all__ = [
    "TranscriptionForm",
    "TranscriptionJson",
    "TranscriptionService",
    "TranscriptionVerbose",
    "attach_router",
    "format_srt",
    "format_vtt",
]

logger = logging.getLogger(__name__)

ResponseFormat = Literal["json", "text", "srt", "verbose_json", "vtt"]
#: Longest wait for one pull of a streamed transcription (a segment of a long file may take this long on a CPU).
_PULL_WAIT = 5.0


# -- protocol ----------------------------------------------------------------------------------------------------------
class TranscriptionForm(OpenAIRequest):
    """The form fields of ``POST /v1/audio/transcriptions`` (and of translations, which take no
    ``timestamp_granularities`` or ``stream``), in OpenAI's order. For a translation ``language`` names the spoken
    language (OpenAI's translations have no such field, Xinference's client sends it): the model skips detecting it,
    and a language the model lacks is a 400 as for a transcription."""

    model: str = Field(min_length=1)
    language: str | None = Field(default=None, max_length=20)
    prompt: str | None = Field(default=None, max_length=4000)
    response_format: ResponseFormat = "json"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    timestamp_granularities: list[Literal["word", "segment"]] = Field(default_factory=list)
    stream: bool = False
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("language", "prompt")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value else None

    def to_engine_params(self, samples: bytes) -> dict[str, Any]:
        return {
            "audio": samples,
            "language": self.language,
            "prompt": self.prompt,
            "temperature": self.temperature,
            "word_timestamps": "word" in self.timestamp_granularities,
        }


class TranscriptionJson(ResponseBody):
    """``response_format=json``."""

    text: str
    usage: dict[str, Any] | None = None


class TranscriptionVerbose(ResponseBody):
    """``response_format=verbose_json``: segments always; words when ``timestamp_granularities`` asks for them."""

    task: Literal["transcribe", "translate"]
    language: str
    duration: float
    text: str
    segments: list[dict[str, Any]] | None = None
    words: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None


# -- response formats --------------------------------------------------------------------------------------------------
def _clock(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def format_srt(segments: list[dict[str, Any]]) -> str:
    """SubRip: numbered cues ``HH:MM:SS,mmm --> HH:MM:SS,mmm``, a blank line after each (the last too)."""
    cues = [
        f"{n}\n{_clock(s['start'], ',')} --> {_clock(s['end'], ',')}\n{s['text'].strip()}\n"
        for n, s in enumerate(segments, start=1)
    ]
    return "\n".join(cues) + ("\n" if cues else "")


def format_vtt(segments: list[dict[str, Any]]) -> str:
    """WebVTT: the ``WEBVTT`` header, then cues ``HH:MM:SS.mmm --> HH:MM:SS.mmm``, a blank line after each."""
    cues = [f"{_clock(s['start'], '.')} --> {_clock(s['end'], '.')}\n{s['text'].strip()}\n" for s in segments]
    return "WEBVTT\n\n" + "\n".join(cues) + ("\n" if cues else "")


def _usage(duration: float) -> dict[str, Any]:
    return {"type": "duration", "seconds": int(math.ceil(duration))}


def render(result: dict[str, Any], form: TranscriptionForm, task: str) -> Response:
    """The engine's ``result`` in the body ``form.response_format`` asks for."""
    kind = form.response_format
    if kind == "json":
        return JSONResponse({"text": result["text"], "usage": _usage(result["duration"])})
    if kind == "text":
        return PlainTextResponse(result["text"] + "\n")
    if kind == "srt":
        return PlainTextResponse(format_srt(result["segments"]))
    if kind == "vtt":
        return PlainTextResponse(format_vtt(result["segments"]), media_type="text/vtt")
    body: dict[str, Any] = {
        "task": task,
        # OpenAI: a transcription names the language spoken, a translation the language written (always English)
        "language": "english" if task == "translate" else result["language"],
        "duration": result["duration"],
        "text": result["text"],
        "segments": result["segments"],
        "usage": _usage(result["duration"]),
    }
    if "word" in form.timestamp_granularities:
        body["words"] = result["words"]
    return JSONResponse(body)


# -- serving -----------------------------------------------------------------------------------------------------------
async def read_form(request: Request, task: str) -> tuple[TranscriptionForm, bytes]:
    """The validated form fields and the decoded samples of ``file``; 400/413 naming what is wrong."""
    limit = max_upload_bytes()
    form = await open_form(
        request,
        files_bytes=limit,
        too_large=f"audio files are limited to {limit / 1024**2:.0f} MiB",
        extra="audio",
        not_multipart="send the audio as multipart/form-data with a 'file' part",
        param="file",
        max_files=1,
    )
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("the form has no 'file' part holding the audio", param="file")
        fields: dict[str, Any] = {}
        for key, value in form.multi_items():
            if key == "file" or not isinstance(value, str):
                continue
            name = key.removesuffix("[]")
            if name == "timestamp_granularities":
                fields.setdefault(name, []).append(value)
            else:
                fields[name] = value
        if task == "translate":
            for name in ("timestamp_granularities", "stream"):
                fields.pop(name, None)
        try:
            parsed = TranscriptionForm.model_validate(fields)
        except ValidationError as exc:
            message, field = validation_message(list(exc.errors()))
            raise InvalidRequest(message, param=field) from None
        filename = upload.filename or "audio"
        check_upload(filename, upload.size or 0)
        data = await upload.read(limit + 1)
        check_upload(filename, len(data))
    finally:
        await form.close()
    decoded = await asyncio.to_thread(decode_audio, data, filename)
    if parsed.stream and parsed.response_format not in ("json", "text"):
        raise InvalidRequest(
            f"stream=true sends the text as it is recognised; it goes with response_format json or text, not "
            f"{parsed.response_format}",
            param="response_format",
        )
    return parsed, decoded.samples


class TranscriptionService:
    """Runs transcriptions and translations against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes

    async def run(self, request: Request, task: Literal["transcribe", "translate"]) -> Response:
        form, samples = await read_form(request, task)
        if form.stream:
            route = await self._route(form, task)
            params = form.to_engine_params(samples)
            return StreamingResponse(await self._open(route.model_uid, params), media_type="text/event-stream")
        return render(await self.whole(form, samples, task), form, task)

    async def whole(
        self, form: TranscriptionForm, samples: bytes, task: Literal["transcribe", "translate"]
    ) -> dict[str, Any]:
        """The engine's whole result (``text``, ``language``, ``duration``, ``segments``, ``words``) for decoded
        ``samples``; the route renders it, the platform's MCP tool answers its text."""
        route = await self._route(form, task)
        params = form.to_engine_params(samples)
        method = "transcribe" if task == "transcribe" else "translate"
        result, _ = await self._routes.call(route, lambda replica: getattr(replica.ref, method)(params))
        return result  # type: ignore[no-any-return]

    async def _route(self, form: TranscriptionForm, task: str) -> Route:
        route = await self._routes.get(form.model)
        check_model_type(route, "audio", "audio2text", "transcriptions" if task == "transcribe" else "translations")
        note_keep_alive(self._routes, route, form.keep_alive)
        return route

    async def _open(self, model: str, params: dict[str, Any]) -> AsyncIterator[bytes]:
        """Open the stream on a replica (errors before the first segment are raised here, as a status code)."""
        route = await self._routes.get(model)
        ticket, route = await self._routes.admit(route)
        try:
            opened, replica = await self._routes.call(
                route, lambda r: r.ref.open_stream("transcriptions", params), ticket
            )
        except BaseException as exc:
            ticket.fail(exc)
            ticket.leave()
            raise
        stream_id, batch, done = opened
        ticket.streamed = True
        replica.outstanding += 1  # the replica counts as busier while the stream lasts (least-busy routing)

        async def frames() -> AsyncIterator[bytes]:
            finished = done
            try:
                async for chunks in self._pull(replica, stream_id, batch, done):
                    frame = _events(chunks)
                    if frame:
                        yield frame
                finished = True
            except XinferenceError as exc:
                finished = True
                ticket.fail(exc)
                yield error_frame(exc)
            except Exception as exc:  # noqa: BLE001 - never leave a client hanging without a closing frame
                finished = True
                logger.exception("a transcription stream of %s failed", model)
                ticket.fail(exc)
                yield error_frame(EngineError(f"the stream failed: {type(exc).__name__}"))
            finally:
                ticket.leave()
                replica.outstanding -= 1
                if not finished:  # the client left: free the engine's worker
                    with contextlib.suppress(Exception):
                        await asyncio.shield(replica.ref.abort(stream_id))

        return frames()

    @staticmethod
    async def _pull(
        replica: Replica, stream_id: str, batch: list[Chunk], done: bool
    ) -> AsyncIterator[list[dict[str, Any]]]:
        yield chunk_dicts(batch)
        while not done:
            pulled = await replica.ref.pull_many([stream_id], _PULL_WAIT)
            if stream_id not in pulled:
                continue
            batch, done, error = pulled[stream_id]
            if error is not None:
                raise error
            yield chunk_dicts(batch)


def _events(chunks: list[dict[str, Any]]) -> bytes:
    """The engine's chunks as OpenAI's transcript events."""
    events: list[dict[str, Any]] = []
    for chunk in chunks:
        if chunk.get("type") == "segment" and chunk.get("text"):
            events.append({"type": "transcript.text.delta", "delta": chunk["text"]})
        elif chunk.get("type") == "done":
            events.append({"type": "transcript.text.done", "text": chunk["text"], "usage": _usage(chunk["duration"])})
    return encode_frames(events) if events else b""


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()

_FORM_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "model"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "model": {"type": "string"},
                        "language": {"type": "string"},
                        "prompt": {"type": "string"},
                        "response_format": {"type": "string", "enum": ["json", "text", "srt", "verbose_json", "vtt"]},
                        "temperature": {"type": "number"},
                        "timestamp_granularities[]": {"type": "array", "items": {"enum": ["word", "segment"]}},
                        "stream": {"type": "boolean"},
                    },
                }
            }
        },
    }
}


def _service(request: Request) -> TranscriptionService:
    service: TranscriptionService = request.app.state.transcriptions
    return service


@router.post("/v1/audio/transcriptions", response_model=TranscriptionVerbose, openapi_extra=_FORM_BODY)
async def transcriptions(request: Request) -> Response:
    return await _service(request).run(request, "transcribe")


@router.post("/v1/audio/translations", response_model=TranscriptionVerbose, openapi_extra=_FORM_BODY)
async def translations(request: Request) -> Response:
    return await _service(request).run(request, "translate")


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
