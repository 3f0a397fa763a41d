"""``xinference launch --model-type image`` and ``xinference registrations --model-type image`` against the shared
server: the catalog's image models are listed, a GPU-only one is refused on this CPU machine with the reason, and a
registered tiny pipeline launches on diffusers with an engine option and draws."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from tests.conftest import LocalServer
from tests.diffusion_models import build_tiny_sd, tiny_sd_family
from xinference.cli.main import main

pytestmark = pytest.mark.slow


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_registrations_and_launch_of_an_image_model(local_server: LocalServer, tmp_path: Path) -> None:
    pytest.importorskip("diffusers")
    endpoint = local_server.endpoint
    listed = run("registrations", "-e", endpoint, "--model-type", "image")
    assert listed.exit_code == 0, listed.output
    assert "sd-turbo" in listed.output and "FLUX.1-dev" in listed.output
    refused = run("launch", "-e", endpoint, "-n", "FLUX.1-dev", "--model-type", "image")
    assert refused.exit_code != 0 and "needs a CUDA GPU" in refused.output

    path = build_tiny_sd(tmp_path / "tiny-sd")
    body = {"model": tiny_sd_family("tiny-sd-cli", path)}
    assert httpx.post(f"{local_server.api}/model_registrations/image", json=body, timeout=30).status_code == 200
    try:
        launched = run(
            "launch", "-e", endpoint, "-n", "tiny-sd-cli", "--model-type", "image", "--num_inference_steps", "2"
        )
        assert launched.exit_code == 0, launched.output
        described = httpx.get(f"{local_server.api}/models/tiny-sd-cli", timeout=30).json()
        assert described["model_type"] == "image" and described["model_engine"] == "diffusers"
        drawn = httpx.post(
            f"{local_server.api}/images/generations",
            json={"model": "tiny-sd-cli", "prompt": "a cat", "size": "64x64", "response_format": "b64_json"},
            timeout=120,
        )
        assert drawn.status_code == 200, drawn.text
    finally:
        httpx.delete(f"{local_server.api}/models/tiny-sd-cli", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/image/tiny-sd-cli", timeout=30)
