"""``xinference engine install|uninstall|list`` and their REST routes against a real ``xinference-local``.

The install is real: MLX's CPU build (``mlx[cpu]`` + ``mlx-lm``, ~20 s, an overlay env) into a fresh folder,
through the worker, with pip's progress relayed to the command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LocalServer, start_local_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("envs-home")
    running = start_local_server(home, env={"XINFERENCE_ENVS_DIR": str(home / "envs")})
    yield running
    running.stop()


def _cli(server: LocalServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XINFERENCE_ENDPOINT": server.endpoint}
    return subprocess.run(
        [sys.executable, "-m", "xinference.cli", *args], capture_output=True, text=True, env=env, timeout=900
    )


def test_nothing_to_install_is_a_clear_400(server: LocalServer) -> None:
    for engine, words in (
        ("llama.cpp", "runs from the platform's own installation, where it is installed"),
        ("SGLang", "cannot be installed on this worker"),
        ("nope", "unknown engine"),
    ):
        response = httpx.post(f"{server.api}/engines/{engine}/install", json={}, timeout=30)
        assert response.status_code == 400, response.text
        assert words in response.json()["error"]["message"]
    bad = httpx.post(f"{server.api}/engines/MLX/install", json={"forcee": True}, timeout=30)
    assert bad.status_code in (400, 422) and "forcee" in bad.text


@pytest.mark.slow
def test_install_list_and_uninstall_through_the_cli(server: LocalServer) -> None:
    before = httpx.get(f"{server.api}/engines", timeout=30).json()
    (reason,) = before["MLX"].values()
    assert "xinference engine install MLX" in reason

    installed = _cli(server, "engine", "install", "MLX")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "[resolving]" in installed.stdout and "MLX installed (" in installed.stdout
    assert "mlx-lm" in installed.stdout
    env_python = Path(server.home) / "envs" / "mlx" / "bin" / "python"
    assert env_python.exists()

    after = httpx.get(f"{server.api}/engines", timeout=30).json()
    assert list(after["MLX"].values()) == [""]  # the worker reports it available now
    status = httpx.get(f"{server.api}/engines/MLX/install", timeout=30).json()
    (worker,) = status["workers"]
    assert worker["installed"] and not worker["installing"] and worker["progress"]["stage"] == "done"

    again = httpx.post(f"{server.api}/engines/MLX/install", json={"wait": True}, timeout=120).json()
    assert again["workers"][0]["progress"]["message"] == "MLX is already installed"

    listed = _cli(server, "engine", "list")
    assert listed.returncode == 0 and "MLX" in listed.stdout

    removed = _cli(server, "engine", "uninstall", "MLX")
    assert removed.returncode == 0 and "removed" in removed.stdout, removed.stderr
    assert not env_python.exists()
    final = httpx.get(f"{server.api}/engines", timeout=30).json()
    assert "xinference engine install MLX" in next(iter(final["MLX"].values()))
