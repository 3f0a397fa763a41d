"""A local stand-in for the Hugging Face Hub: a real HTTP server on 127.0.0.1 that the download code talks to.

It answers what ``huggingface_hub`` and our downloader ask: ``HEAD``/``GET /{org}/{repo}/resolve/{rev}/{file}``
(ETag, X-Repo-Commit, X-Linked-Size, Content-Length, ``Range`` → 206) and ``GET /api/models/{org}/{repo}/tree/{rev}``.
Tests can throttle transfers (``rate`` bytes/s), drop a connection after N bytes once (``drop_after``), and read
the request log (``requests``: method, file, Range header, body bytes sent).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_TREE = re.compile(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)$")
_CHUNK = 64 * 1024


@dataclass
class Served:
    source: bytes | Path
    size: int
    sha256: str

    def read(self, start: int, length: int) -> bytes:
        if isinstance(self.source, bytes):
            return self.source[start : start + length]
        with self.source.open("rb") as handle:
            handle.seek(start)
            return handle.read(length)


@dataclass
class Logged:
    method: str
    filename: str
    range: str | None
    sent: int = 0


class FakeHub:
    """Start with ``with FakeHub() as hub:``; ``hub.url`` is the HF_ENDPOINT to use."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, Served]] = {}
        self.requests: list[Logged] = []
        self.drop_after: dict[str, int] = {}
        self.rate: float | None = None
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_HEAD(self) -> None:
                hub._resolve(self, body=False)

            def do_GET(self) -> None:
                path = unquote(urlsplit(self.path).path)
                if _TREE.match(path):
                    hub._tree(self, path)
                else:
                    hub._resolve(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, repo_id: str, filename: str, content: bytes | Path) -> Served:
        if isinstance(content, bytes):
            served = Served(content, len(content), hashlib.sha256(content).hexdigest())
        else:
            digest = hashlib.sha256()
            with content.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
            served = Served(content, content.stat().st_size, digest.hexdigest())
        self.repos.setdefault(repo_id, {})[filename] = served
        return served

    def gets(self, filename: str) -> list[Logged]:
        return [r for r in self.requests if r.method == "GET" and r.filename == filename]

    # -- handlers -----------------------------------------------------------------------------------------------
    def _tree(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        match = _TREE.match(path)
        assert match is not None
        files = self.repos.get(match.group(1))
        if files is None:
            self._error(handler, 404, "RepoNotFound")
            return
        body = json.dumps(
            [{"type": "file", "path": name, "size": f.size, "oid": f.sha256[:40]} for name, f in files.items()]
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _error(self, handler: BaseHTTPRequestHandler, status: int, code: str) -> None:
        handler.send_response(status)
        handler.send_header("X-Error-Code", code)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _resolve(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        match = _RESOLVE.match(unquote(urlsplit(handler.path).path))
        if match is None:
            self._error(handler, 404, "RepoNotFound")
            return
        repo_id, _revision, filename = match.groups()
        entry = Logged(handler.command, filename, handler.headers.get("Range"))
        with self._lock:
            self.requests.append(entry)
        files = self.repos.get(repo_id)
        if files is None:
            self._error(handler, 404, "RepoNotFound")
            return
        served = files.get(filename)
        if served is None:
            self._error(handler, 404, "EntryNotFound")
            return
        start = 0
        if entry.range:
            start = int(re.fullmatch(r"bytes=(\d+)-", entry.range).group(1))  # type: ignore[union-attr]
            if start >= served.size:
                self._error(handler, 416, "RangeNotSatisfiable")
                return
        handler.send_response(206 if start else 200)
        handler.send_header("ETag", f'"{served.sha256}"')
        handler.send_header("X-Linked-Etag", f'"{served.sha256}"')
        handler.send_header("X-Linked-Size", str(served.size))
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("Content-Length", str(served.size - start))
        if start:
            handler.send_header("Content-Range", f"bytes {start}-{served.size - 1}/{served.size}")
        handler.end_headers()
        if body:
            self._send_body(handler, served, start, entry)

    def _send_body(self, handler: BaseHTTPRequestHandler, served: Served, start: int, entry: Logged) -> None:
        drop = self.drop_after.pop(entry.filename, None) if self.drop_after else None
        position = start
        try:
            while position < served.size:
                if drop is not None and entry.sent >= drop:
                    handler.wfile.flush()
                    handler.connection.shutdown(socket.SHUT_RDWR)  # a transfer cut mid-way
                    handler.close_connection = True
                    return
                chunk = served.read(position, _CHUNK if drop is None else min(_CHUNK, drop - entry.sent))
                handler.wfile.write(chunk)
                position += len(chunk)
                entry.sent += len(chunk)
                if self.rate:
                    time.sleep(len(chunk) / self.rate)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
