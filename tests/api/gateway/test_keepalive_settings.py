"""Keep-alive's server settings over HTTP, on a real ``xinference-local`` of their own: ``XINFERENCE_KEEP_ALIVE``
(the keep-alive of launches that name none), ``XINFERENCE_KEEP_ALIVE_OVERRIDE=0`` (a request's ``keep_alive`` is
ignored, though still checked) and ``XINFERENCE_LOAD_TIMEOUT`` (a request that waited that long for a load on
demand gets a 503 with ``Retry-After`` while the load goes on).

Nothing is slowed artificially: loading the bundled model (a process start, llama.cpp reading its weights) takes
seconds, and the load timeout here is 50 ms.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.gateway.test_keepalive import _chat, _describe, _gone, _wait_status
from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server

pytestmark = pytest.mark.slow

UID = "settings-smollm"
SERVER_KEEP_ALIVE = "3s"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    started = start_local_server(
        tmp_path_factory.mktemp("keepalive-settings"),
        env={
            "XINFERENCE_KEEP_ALIVE": SERVER_KEEP_ALIVE,
            "XINFERENCE_KEEP_ALIVE_OVERRIDE": "0",
            "XINFERENCE_LOAD_TIMEOUT": "0.05",
        },
    )
    try:
        yield started
    finally:
        started.stop_and_reap()


def _chat_once_loaded(server: LocalServer, **extra: Any) -> httpx.Response:
    """A chat request, retried (as a client honouring Retry-After would, sooner) while the model is still loading."""
    deadline = time.monotonic() + 120
    while True:
        reply = _chat(server, UID, **extra)
        if reply.status_code != 503 or time.monotonic() > deadline:
            return reply
        assert reply.json()["error"]["code"] == "model_loading", reply.text
        time.sleep(0.5)


def test_server_default_load_timeout_and_no_request_overrides(server: LocalServer) -> None:
    launched = httpx.post(
        f"{server.api}/models",
        timeout=300,
        json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp", "model_uid": UID},
    )
    assert launched.status_code == 200, launched.text
    info = _describe(server, UID)
    assert info["keep_alive"] == SERVER_KEEP_ALIVE  # the launch named none: the server's default holds
    pid = info["replicas"][0]["pid"]
    _wait_status(server, UID, "unloaded", 60)
    deadline = time.monotonic() + 20
    while not _gone(pid):
        assert time.monotonic() < deadline, "the unloaded replica's process is still alive"
        time.sleep(0.2)

    # Overrides are off, yet a keep_alive that is no duration is still refused, before any load starts.
    bad = _chat(server, UID, keep_alive="soon")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "keep_alive", bad.text
    assert _describe(server, UID)["status"] == "unloaded"

    # The load on demand takes longer than XINFERENCE_LOAD_TIMEOUT: 503 with Retry-After, and the load goes on.
    refused = _chat(server, UID, keep_alive=-1)
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    error = refused.json()["error"]
    assert error["code"] == "model_loading" and "XINFERENCE_LOAD_TIMEOUT" in error["message"]
    _wait_status(server, UID, "ready", 120)
    reply = _chat_once_loaded(server, keep_alive=-1)
    assert reply.status_code == 200, reply.text

    # The requests asked for "forever", but XINFERENCE_KEEP_ALIVE_OVERRIDE=0: the server's 3 s still applies.
    _wait_status(server, UID, "unloaded", 60)
