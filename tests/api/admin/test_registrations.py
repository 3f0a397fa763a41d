"""Custom registrations: a GGUF from a file:// folder launches, chats, survives a restart and unregisters."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from tests.conftest import start_local_server
from tests.custom_models import link_smollm2_gguf, smollm2_gguf_family
from xinference.cli.main import main as cli


@pytest.fixture(scope="module")
def gguf_folder(tmp_path_factory) -> str:
    return str(link_smollm2_gguf(tmp_path_factory.mktemp("my-weights"), "my-smol"))


def spec(name: str, folder: str, **extra) -> dict:
    return smollm2_gguf_family(name, folder, ["chat", "generate"], **extra)


def test_register_launch_chat_restart_unregister(tmp_path, gguf_folder: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec("my-smol", gguf_folder)))
    server = start_local_server(home)
    try:
        result = CliRunner().invoke(
            cli, ["register", "-e", server.endpoint, "-t", "LLM", "--file", str(spec_file), "--persist"]
        )
        assert result.exit_code == 0, result.output
    finally:
        server.stop()

    server = start_local_server(home)  # a restart: the registration comes back from XINFERENCE_HOME
    try:
        listed = CliRunner().invoke(cli, ["registrations", "-e", server.endpoint])
        assert "my-smol" in listed.output and "custom" in listed.output
        entries = httpx.get(f"{server.api}/model_registrations/LLM", params={"detailed": "false"}).json()
        assert {"model_name": "my-smol", "is_builtin": False} in entries
        assert {"model_name": "smollm2-instruct", "is_builtin": True} in entries
        launched = httpx.post(f"{server.api}/models", json={"model_name": "my-smol"}, timeout=120)
        assert launched.status_code == 200, launched.text
        assert launched.json()["model_engine"] == "llama.cpp"  # chosen without being asked
        reply = httpx.post(
            f"{server.api}/chat/completions",
            timeout=60,
            json={
                "model": "my-smol",
                "temperature": 0,
                "max_tokens": 16,
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "What is the capital of France?"},
                ],
            },
        ).json()
        assert "Paris" in reply["choices"][0]["message"]["content"]
        described = httpx.get(f"{server.api}/models/my-smol").json()
        assert described["engine_config"]["n_ctx"] == 2048  # the registered context length sizes the engine
        httpx.delete(f"{server.api}/models/my-smol")
        result = CliRunner().invoke(cli, ["unregister", "-e", server.endpoint, "-n", "my-smol"])
        assert result.exit_code == 0, result.output
    finally:
        server.stop()

    server = start_local_server(home)
    try:
        names = [e["model_name"] for e in httpx.get(f"{server.api}/model_registrations/LLM").json()]
        assert "my-smol" not in names
        assert not list((home / "registrations").glob("*/*.json"))
    finally:
        server.stop()


@pytest.mark.parametrize(
    "change,status,needle",
    [
        ({"model_name": "smollm2-instruct"}, 400, "built-in"),
        ({"model_name": "../../etc/passwd"}, 400, "model_name"),
        ({"model_name": "bad\u0000name"}, 400, "model_name"),
        ({"model_name": "n" * 150}, 400, "model_name"),
        ({"surprise": True}, 400, "surprise"),
        ({"context_length": "long"}, 400, "context_length"),
    ],
)
def test_bad_registrations(local_server, gguf_folder: str, change: dict, status: int, needle: str) -> None:
    body = {"model": json.dumps({**spec("okname", gguf_folder), **change}), "persist": False}
    response = httpx.post(f"{local_server.api}/model_registrations/LLM", json=body)
    assert response.status_code == status, response.text
    assert needle in response.json()["error"]["message"]


def test_missing_local_weights_are_refused(local_server, tmp_path) -> None:
    body = {"model": json.dumps(spec("ghost", str(tmp_path / "nothing-here")))}
    response = httpx.post(f"{local_server.api}/model_registrations/LLM", json=body)
    assert response.status_code == 400 and "do not exist" in response.json()["error"]["message"]


def test_register_twice_is_409_and_unknown_unregister_404(local_server, gguf_folder: str) -> None:
    body = {"model": json.dumps(spec("twice", gguf_folder))}
    assert httpx.post(f"{local_server.api}/model_registrations/LLM", json=body).status_code == 200
    try:
        assert httpx.post(f"{local_server.api}/model_registrations/LLM", json=body).status_code == 409
        got = httpx.get(f"{local_server.api}/model_registrations/LLM/twice").json()
        assert got["model_name"] == "twice" and got["is_builtin"] is False
    finally:
        assert httpx.delete(f"{local_server.api}/model_registrations/LLM/twice").status_code == 200
    assert httpx.delete(f"{local_server.api}/model_registrations/LLM/twice").status_code == 404
    assert httpx.delete(f"{local_server.api}/model_registrations/LLM/smollm2-instruct").status_code == 400
    assert httpx.get(f"{local_server.api}/model_registrations/videos").status_code == 400


def test_hub_id_in_model_uri_becomes_model_id() -> None:
    from xinference.model.spec import ModelSpec

    parsed = ModelSpec.model_validate(
        {
            "model_format": "pytorch",
            "model_size_in_billions": 1,
            "quantizations": ["none"],
            "model_uri": "Qwen/Qwen2.5-0.5B-Instruct",
        }
    )
    assert parsed.model_id == "Qwen/Qwen2.5-0.5B-Instruct" and parsed.model_uri is None
