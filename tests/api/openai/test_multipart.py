"""Opening an upload's form (``xinference.api.openai.multipart``), shared by image edits and transcriptions: each
refusal is the right error naming the caller's part, and a good form comes back with its fields and files. The
requests are real Starlette requests over an in-memory body."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest
from fastapi import Request
from starlette.datastructures import UploadFile

from xinference.api.openai.multipart import FORM_OVERHEAD, open_form
from xinference.errors import InvalidRequest, ModelUnavailable, RequestTooLarge

BOUNDARY = "xinfboundary"


def multipart(*parts: tuple[str, str | None, bytes]) -> bytes:
    """A multipart body of (name, filename or None for a field, content)."""
    out = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def request(body: bytes, content_type: str, length: int | None = None) -> Request:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(length or len(body)).encode())]
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""}, receive)


def open_audio(req: Request, max_files: int = 1) -> Any:
    return asyncio.run(
        open_form(
            req,
            files_bytes=1000,
            too_large="audio files are limited to 1000 bytes",
            extra="audio",
            not_multipart="send the audio as multipart/form-data with a 'file' part",
            param="file",
            max_files=max_files,
        )
    )


def test_a_good_form_comes_back_with_its_fields_and_files() -> None:
    body = multipart(("model", None, b"whisper"), ("file", "a.wav", b"RIFF"))
    form = open_audio(request(body, f"multipart/form-data; boundary={BOUNDARY}"))
    upload = form.get("file")
    assert form.get("model") == "whisper" and isinstance(upload, UploadFile) and upload.filename == "a.wav"
    asyncio.run(form.close())


def test_refusals_name_the_callers_part() -> None:
    kind = f"multipart/form-data; boundary={BOUNDARY}"
    with pytest.raises(RequestTooLarge) as large:
        open_audio(request(b"", kind, length=1000 + FORM_OVERHEAD + 1))
    assert large.value.param == "file" and large.value.message.endswith("MiB; audio files are limited to 1000 bytes")
    with pytest.raises(InvalidRequest) as other:
        open_audio(request(b'{"model": "w"}', "application/json"))
    assert other.value.message == "send the audio as multipart/form-data with a 'file' part"
    two = multipart(("file", "a.wav", b"RIFF"), ("file", "b.wav", b"RIFF"))
    with pytest.raises(InvalidRequest) as many:
        open_audio(request(two, kind))
    assert many.value.param == "file" and many.value.message.startswith("could not read the multipart form")


def test_without_python_multipart_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "python_multipart" else real(n))
    with pytest.raises(ModelUnavailable, match=r"pip install 'xinference\[audio\]'"):
        open_audio(request(multipart(("file", "a.wav", b"RIFF")), f"multipart/form-data; boundary={BOUNDARY}"))
