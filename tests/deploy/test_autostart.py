"""Launch history and autostart across a restart of ``xinference-local``, driven through the CLI (``launch
--persist``, ``logs``, ``launch-history``) and the Python client: the persisted model comes back with its uid and
options, the one launched without ``--persist`` does not, and one terminated on purpose stays terminated."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from xinference.cli.main import main
from xinference.client import Client

pytestmark = pytest.mark.slow


def _cli(server: LocalServer, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "-e", server.endpoint], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _stop(server: LocalServer) -> None:
    assert server.stop() == 0, server.log()[-3000:]


def test_persisted_model_comes_back_after_a_restart(tmp_path: Path) -> None:
    server = start_local_server(tmp_path)
    try:
        out = _cli(
            server,
            "launch",
            "-n",
            DEFAULT_MODEL,
            "-en",
            "llama.cpp",
            "-u",
            "kept",
            "--persist",
            "--n_ctx",
            "2048",
            "--keep_alive",
            "10m",
        )
        assert "Model uid: kept" in out
        _cli(server, "launch", "-n", DEFAULT_MODEL, "-en", "llama.cpp", "-u", "plain")
        with Client(server.endpoint) as client:
            history = {e["model_uid"]: e for e in client.get_launch_history()}
            assert history["kept"]["autostart"] is True and history["plain"]["autostart"] is False
            assert history["kept"]["request"]["engine_kwargs"]["n_ctx"] == 2048 and history["kept"]["status"] == "ready"
            logs = _cli(server, "logs", "kept", "-n", "5")
            assert 0 < len(logs.strip().splitlines()) <= 5 and str(tmp_path) not in logs
        assert "kept" in _cli(server, "launch-history")
    finally:
        _stop(server)

    server = start_local_server(tmp_path)  # same XINFERENCE_HOME
    try:
        deadline = time.monotonic() + 300
        with Client(server.endpoint) as client:
            while True:
                models = client.list_models()
                if models.get("kept", {}).get("status") == "ready":
                    break
                assert time.monotonic() < deadline, f"kept did not come back: {models}\n{server.log()[-3000:]}"
                time.sleep(0.5)
            assert "plain" not in models
            kept = models["kept"]
            assert kept["engine_config"]["n_ctx"] == 2048 and kept["keep_alive"] == "10m" and kept["autostart"]
            reply = client.chat_completion("kept", [{"role": "user", "content": "hi"}], max_tokens=3)
            assert reply["choices"][0]["message"]["role"] == "assistant"
            _cli(server, "terminate", "-u", "kept")  # on purpose: it must not come back
            history = {e["model_uid"]: e for e in client.get_launch_history()}
            assert history["kept"]["autostart"] is False and history["kept"]["status"] == "not running"
    finally:
        _stop(server)

    server = start_local_server(tmp_path)
    try:
        time.sleep(3)  # autostart runs when the worker joins, before the server answers; give it a moment
        assert httpx.get(f"{server.api}/models", timeout=30).json()["data"] == []
    finally:
        _stop(server)
