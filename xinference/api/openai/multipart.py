"""Opening a multipart upload (image edits, transcriptions): the checks every upload route makes before it reads
the parts, each refusal naming the part the client should look at.

- a Content-Length beyond the files' limit plus :data:`FORM_OVERHEAD` is refused before a byte is read (413);
- without python-multipart on the API server no form can be read (503, naming the extra that brings it);
- a body that is not ``multipart/form-data``, or that Starlette's parser cannot read, is a 400.

The caller reads its parts from the returned form and closes it (``await form.close()``).
"""

from __future__ import annotations

import importlib.util

from fastapi import Request
from starlette.datastructures import FormData

from xinference.errors import InvalidRequest, ModelUnavailable, RequestTooLarge

__all__ = ["FORM_OVERHEAD", "open_form"]

#: Multipart overhead allowed beside the files before a Content-Length alone says the upload is too large.
FORM_OVERHEAD = 1024 * 1024


async def open_form(
    request: Request, *, files_bytes: int, too_large: str, extra: str, not_multipart: str, param: str, max_files: int
) -> FormData:
    """The request's form, at most ``max_files`` files and 64 fields. ``files_bytes``: the most the files may hold
    together; ``too_large``: what the 413 says after the request's size; ``extra``: the install extra that brings
    python-multipart; ``not_multipart``: the 400 for another content type; ``param``: the part errors name."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > files_bytes + FORM_OVERHEAD:
        raise RequestTooLarge(f"the request is {int(length) / 1024**2:.1f} MiB; {too_large}", param=param)
    if importlib.util.find_spec("python_multipart") is None:
        raise ModelUnavailable(
            f"reading uploads needs python-multipart on the API server: pip install 'xinference[{extra}]'"
        )
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequest(not_multipart, param=param)
    try:
        return await request.form(max_files=max_files, max_fields=64)
    except Exception as exc:  # noqa: BLE001 - Starlette's parser errors: a malformed body is the client's
        raise InvalidRequest(f"could not read the multipart form: {exc}", param=param) from None
