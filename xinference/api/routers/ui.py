"""The web UI: static files from ``xinference/ui/`` served at ``/ui/``; ``/`` and ``/ui`` redirect there.

The UI is plain ES modules with no build step, shipped as package data, so an installed wheel serves it without
node. It is served without an API key (the page itself holds no data); every API call it makes needs one when
keys are on (see ``api/auth.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

__all__ = ["UI_DIR", "attach_router"]

UI_DIR = Path(__file__).resolve().parent.parent.parent / "ui"


class _UiFiles(StaticFiles):
    """Static files that the browser revalidates on every load (ETag), so an upgrade is seen at once."""

    def file_response(self, full_path: PathLike, stat_result: os.stat_result, scope: Scope,
                      status_code: int = 200) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


def attach_router(app: FastAPI) -> None:
    async def to_ui() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    app.add_api_route("/", to_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui", to_ui, methods=["GET"], include_in_schema=False)
    app.mount("/ui", _UiFiles(directory=UI_DIR, html=True), name="ui")
