"""``xinference-local`` as a process: start-up, API keys, and shutdown that leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from tests.conftest import start_local_server


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_everything(tmp_path, sig: int) -> None:
    server = start_local_server(tmp_path, "--launch", "smollm2-instruct")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listing = httpx.get(f"{server.api}/models", timeout=5).json()["data"]
            if listing and listing[0]["status"] == "ready":
                break
            time.sleep(0.1)
        assert [(m["id"], m["status"]) for m in listing] == [("smollm2-instruct", "ready")]
        children = server.descendants()
        assert children, "the model should run in a subprocess of its own"
        reply = httpx.post(
            f"{server.api}/chat/completions",
            timeout=60,
            json={"model": "smollm2-instruct", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        )
        assert reply.status_code == 200
    except BaseException:
        server.stop(signal.SIGKILL)
        raise
    code = server.stop(sig, timeout=60)
    assert code == 0, server.log()
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left behind: {[p.pid for p in alive]}"
    assert "stopped" in server.log()
    assert (tmp_path / "logs" / "local.log").exists()
    assert (tmp_path / "logs" / "models" / "smollm2-instruct-0.log").exists()


def test_api_keys_cover_every_route(tmp_path) -> None:
    server = start_local_server(tmp_path, env={"XINFERENCE_API_KEYS": "key-one,key-two"})
    try:
        assert httpx.get(f"{server.api}/cluster/auth").json() == {"auth": True}
        for method, path in [
            ("GET", "/status"),
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("DELETE", "/v1/models/x"),
            ("GET", "/v1/nothing"),
        ]:
            response = httpx.request(method, f"{server.endpoint}{path}")
            assert response.status_code == 401, path
            assert response.json()["error"]["type"] == "authentication_error"
        wrong = httpx.get(f"{server.api}/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        for key in ("key-one", "key-two"):
            ok = httpx.get(f"{server.api}/models", headers={"Authorization": f"Bearer {key}"})
            assert ok.status_code == 200 and ok.json()["data"] == []
    finally:
        server.stop()


def test_port_in_use_fails_clearly(tmp_path, local_server) -> None:
    port = local_server.endpoint.rsplit(":", 1)[1]
    result = subprocess.run(
        [sys.executable, "-m", "xinference.deploy.local", "--port", port],
        capture_output=True,
        text=True,
        timeout=60,
        env={"XINFERENCE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0
    assert "address already in use" in (result.stderr + result.stdout).lower()
