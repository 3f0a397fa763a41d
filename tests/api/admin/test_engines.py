"""The engine matrix (``GET /v1/engines/...``), its client and CLI, and the memory check at launch, against the
session's real ``xinference-local``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from tests.conftest import DEFAULT_MODEL, LocalServer
from xinference.api.admin.models.protocol import LaunchModelRequest
from xinference.cli.main import main
from xinference.client import Client
from xinference.engines.envs import MANIFEST_NAME, env_slug

SGLANG_REASON = "SGLang has no CPU build; it needs an NVIDIA GPU"


def _installed(server: LocalServer, engine: str) -> bool:
    """Whether the server's worker has ``engine``'s env: the session's server reads ``XINFERENCE_ENVS_DIR`` when
    the test run sets it (CI's shared envs), else its temporary home's ``envs`` (empty)."""
    root = Path(os.environ.get("XINFERENCE_ENVS_DIR") or server.home / "envs").expanduser()
    return (root / env_slug(engine) / MANIFEST_NAME).is_file()


def test_engine_matrix_for_the_default_model(local_server: LocalServer) -> None:
    """The table on this x86 Linux CPU: vLLM (its CPU build) and MLX take the pytorch specs when their envs are
    installed and name the install command when not; SGLang gives its reason; llama.cpp takes the bundled GGUF.
    The tests of vLLM and MLX check the installed side against servers that have the envs."""
    for path in (f"/v1/engines/{DEFAULT_MODEL}", f"/v1/engines/LLM/{DEFAULT_MODEL}"):
        response = httpx.get(local_server.endpoint + path, timeout=30)
        assert response.status_code == 200, response.text
        table = response.json()
        for engine in ("vLLM", "MLX"):
            if _installed(local_server, engine):
                assert {p["model_format"] for p in table[engine]} == {"pytorch"}, table[engine]
            else:
                assert (
                    table[engine] == f"{engine} is not installed on this worker; install it with "
                    f"`xinference engine install {engine}`"
                ), table[engine]
        assert table["SGLang"] == SGLANG_REASON
        accepted = table["llama.cpp"]
        assert isinstance(accepted, list)
        bundled = [p for p in accepted if p["model_hub"] == "bundled"]
        assert bundled == [
            {
                "model_name": DEFAULT_MODEL,
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantizations": ["Q4_1"],
                "model_hub": "bundled",
            }
        ]


def test_engine_matrix_errors(local_server: LocalServer) -> None:
    missing = httpx.get(f"{local_server.api}/engines/LLM/no-such-model", timeout=30)
    assert missing.status_code == 404 and "no-such-model" in missing.json()["error"]["message"]
    wrong_type = httpx.get(f"{local_server.api}/engines/embedding/{DEFAULT_MODEL}", timeout=30)
    assert wrong_type.status_code == 404
    bad_type = httpx.get(f"{local_server.api}/engines/video/{DEFAULT_MODEL}", timeout=30)
    assert bad_type.status_code == 400


def test_official_client_query_engine_by_model_name(local_server: LocalServer) -> None:
    from xinference_client import RESTfulClient

    table = RESTfulClient(local_server.endpoint).query_engine_by_model_name(DEFAULT_MODEL)
    assert isinstance(table["llama.cpp"], list) and table["SGLang"] == SGLANG_REASON


def test_our_client_and_cli(local_server: LocalServer) -> None:
    with Client(local_server.endpoint) as client:
        assert isinstance(client.query_engine_by_model_name(DEFAULT_MODEL)["llama.cpp"], list)
        assert isinstance(client.query_engine_by_model_name(DEFAULT_MODEL, model_type=None)["llama.cpp"], list)
    result = CliRunner().invoke(
        main, ["engine", "-n", DEFAULT_MODEL, "-e", local_server.endpoint], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:2] == ["Engine", "Format"]
    assert any(line.startswith("llama.cpp") and "Q4_1" in line and "bundled" in line for line in lines)
    assert any(line.startswith("SGLang") and SGLANG_REASON in line for line in lines)
    missing = CliRunner().invoke(main, ["engine", "-n", "no-such-model", "-e", local_server.endpoint])
    assert missing.exit_code == 1 and "no-such-model" in missing.output


def test_oversized_launch_is_refused_before_any_download(local_server: LocalServer) -> None:
    started = time.monotonic()
    response = httpx.post(
        f"{local_server.api}/models",
        json={
            "model_name": "llama-3.1-instruct",
            "model_engine": "llama.cpp",
            "model_format": "ggufv2",
            "model_size_in_billions": 70,
            "quantization": "Q4_K_M",
        },
        timeout=60,
    )
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "needs ~" in message and "GiB, worker has" in message and "GiB free" in message
    assert "ignore_memory_check=true" in message
    assert time.monotonic() - started < 10
    listed = httpx.get(f"{local_server.api}/models", timeout=30).json()["data"]
    assert "llama-3.1-instruct" not in {m["model_uid"] for m in listed}
    assert not [p for p in local_server.home.rglob("*") if "70B" in p.name]  # nothing was fetched


def test_ignore_memory_check_is_a_platform_field() -> None:
    launch = LaunchModelRequest.model_validate(
        {"model_name": DEFAULT_MODEL, "ignore_memory_check": True, "n_ctx": 2048}
    ).to_launch()
    assert launch["ignore_memory_check"] is True
    assert launch["engine_kwargs"] == {"n_ctx": 2048}
    assert LaunchModelRequest.model_validate({"model_name": DEFAULT_MODEL}).to_launch()["ignore_memory_check"] is False
