"""The web UI: static files from ``xinference/ui/`` served at ``/ui/``; ``/`` and ``/ui`` redirect there.

The UI is plain ES modules with no build step, shipped as package data, so an installed wheel serves it without
node. It is served without an API key (the page itself holds no data); every API call it makes needs one when
keys are on (see ``api/auth.py``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

__all__ = ["UI_DIR", "attach_router", "content_security_policy"]

UI_DIR = Path(__file__).resolve().parent.parent.parent / "ui"


def content_security_policy(index_html: str) -> str:
    """Only this server's own scripts (and index.html's two inline ones, by hash) may run, only this server may be
    fetched, and no other site may frame the UI: a second wall behind the sanitising of model output. Media may also
    come from ``blob:`` URLs, which only this page can make: the Audio page plays the speech and the recording it
    holds in memory."""
    inline = re.findall(r"<script(?![^>]*\ssrc=)[^>]*>(.*?)</script>", index_html, re.S)
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in inline)
    return (
        "default-src 'self'; script-src 'self' " + hashes + "; style-src 'self'; img-src 'self' data:; "
        "media-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )


class _UiFiles(StaticFiles):
    """Static files that the browser revalidates on every load (ETag), so an upgrade is seen at once."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory=directory, html=True)
        self.csp = content_security_policy((directory / "index.html").read_text(encoding="utf-8"))

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = self.csp
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def attach_router(app: FastAPI) -> None:
    async def to_ui() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    app.add_api_route("/", to_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui", to_ui, methods=["GET"], include_in_schema=False)
    app.mount("/ui", _UiFiles(UI_DIR), name="ui")
