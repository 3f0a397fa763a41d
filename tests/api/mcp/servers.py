"""Starting the tests' MCP servers: the SDK-written ``tool_server.py`` (stdio or streamable HTTP) and the published
``mcp-server-time`` from PyPI."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOOL_SERVER = Path(__file__).with_name("tool_server.py")
#: the published server's command, installed into the same environment as the tests (pyproject's dev extra)
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")


def stdio_entry() -> dict[str, object]:
    """The config entry of the tool server over stdio."""
    return {"command": sys.executable, "args": [str(TOOL_SERVER), "stdio"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


@contextmanager
def http_tool_server(port: int | None = None) -> Iterator[str]:
    """The tool server over streamable HTTP; yields its URL and stops it after."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, str(TOOL_SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
