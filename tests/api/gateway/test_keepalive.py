"""Keep-alive over HTTP (Ollama's semantics): ``2s`` unloads an idle model (its process ends) and a request loads
it again, eight concurrent requests causing one load; ``-1`` never unloads; ``0`` unloads after the response; a
request's own ``keep_alive`` replaces the launch's."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import psutil
import pytest

from tests.api.test_metrics import scrape, value
from tests.conftest import DEFAULT_MODEL, LocalServer

pytestmark = pytest.mark.slow


def _launch(server: LocalServer, uid: str, keep_alive: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{server.api}/models",
        timeout=300,
        json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp", "model_uid": uid, "keep_alive": keep_alive},
    )
    assert response.status_code == 200, response.text
    return _describe(server, uid)


def _describe(server: LocalServer, uid: str) -> dict[str, Any]:
    response = httpx.get(f"{server.api}/models/{uid}", timeout=30)
    assert response.status_code == 200, response.text
    info: dict[str, Any] = response.json()
    return info


def _wait_status(server: LocalServer, uid: str, status: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = _describe(server, uid)
        if info["status"] == status:
            return info
        assert time.monotonic() < deadline, f"{uid} is {info['status']}, not {status}"
        time.sleep(0.2)


def _chat(server: LocalServer, uid: str, **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{server.api}/chat/completions",
        timeout=300,
        json={"model": uid, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, **extra},
    )


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_idle_model_unloads_and_eight_requests_load_it_once(local_server: LocalServer) -> None:
    uid = "keepalive-2s"
    info = _launch(local_server, uid, "2s")
    try:
        pid = info["replicas"][0]["pid"]
        assert info["keep_alive"] == "2s" and psutil.Process(pid).memory_info().rss > 50 * 2**20
        unloaded = _wait_status(local_server, uid, "unloaded", 60)
        assert unloaded["replicas"] == [] and unloaded["model_engine"] == "llama.cpp"
        deadline = time.monotonic() + 20
        while not _gone(pid):  # the process ended: its memory went with it
            assert time.monotonic() < deadline, "the unloaded replica's process is still alive"
            time.sleep(0.2)
        listed = {m["id"]: m for m in httpx.get(f"{local_server.api}/models", timeout=30).json()["data"]}
        assert listed[uid]["status"] == "unloaded"  # still listed, with its launch plan
        events_url = f"{local_server.api}/models/{uid}/events"
        events_before = httpx.get(events_url, timeout=30).json()["events"]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda _: _chat(local_server, uid), range(8)))
        assert [r.status_code for r in replies] == [200] * 8, [r.text for r in replies if r.status_code != 200]
        events = httpx.get(events_url, timeout=30).json()["events"][len(events_before) :]
        assert [e["event"] for e in events].count("loading") == 1
        page = scrape(local_server.endpoint)
        assert value(page, "xinference:model_loads_on_demand_total", model_name=uid) == 1
        reloaded = _describe(local_server, uid)
        assert reloaded["replicas"] and reloaded["replicas"][0]["pid"] != pid
        _wait_status(local_server, uid, "unloaded", 60)  # idle again: unloads again
    finally:
        httpx.delete(f"{local_server.api}/models/{uid}", timeout=60)


def test_forever_never_unloads_and_zero_unloads_after_the_response(local_server: LocalServer) -> None:
    forever, zero = "keepalive-forever", "keepalive-zero"
    info = _launch(local_server, forever, -1)
    try:
        assert info["keep_alive"] == "forever"
        _launch(local_server, zero, 0)
        _wait_status(local_server, zero, "unloaded", 60)  # nothing running: unloaded at once
        reply = _chat(local_server, zero)
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]
        _wait_status(local_server, zero, "unloaded", 30)  # and again right after the response
        assert _chat(local_server, forever).status_code == 200
        time.sleep(4)
        still = _describe(local_server, forever)
        assert still["status"] == "ready" and still["replicas"][0]["pid"] == info["replicas"][0]["pid"]
        bad = _chat(local_server, forever, keep_alive="soon")
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "keep_alive"
        # A request's own keep_alive replaces the launch's (Ollama's per-request field).
        assert _chat(local_server, forever, keep_alive="1s").status_code == 200
        _wait_status(local_server, forever, "unloaded", 30)
    finally:
        for uid in (forever, zero):
            httpx.delete(f"{local_server.api}/models/{uid}", timeout=60)
