"""Model management routes, and compatibility with the official ``xinference-client``."""

from __future__ import annotations

import httpx
import pytest
from xinference_client import RESTfulClient


def test_list_and_describe(local_server, model_uid: str) -> None:
    listing = httpx.get(f"{local_server.api}/models").json()
    assert listing["object"] == "list"
    entry = next(m for m in listing["data"] if m["id"] == model_uid)
    assert entry["model_engine"] == "llama.cpp"
    assert entry["model_format"] == "ggufv2" and entry["quantization"] == "Q4_1"
    assert entry["model_size_in_billions"] == "0_135"
    assert entry["engine_config"]["n_parallel"] >= 2
    described = httpx.get(f"{local_server.api}/models/{model_uid}").json()
    assert described["model_type"] == "LLM" and "chat" in described["model_ability"]


def test_status_and_auth_probe(local_server) -> None:
    assert httpx.get(f"{local_server.endpoint}/status").json() == {"status": "ok"}
    assert httpx.get(f"{local_server.api}/cluster/auth").json() == {"auth": False}


@pytest.fixture(scope="module")
def official(local_server) -> RESTfulClient:
    return RESTfulClient(local_server.endpoint)


def test_official_client_chat(official: RESTfulClient, model_uid: str) -> None:
    assert model_uid in official.list_models()
    model = official.get_model(model_uid)
    reply = model.chat(
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        generate_config={"temperature": 0, "max_tokens": 24},
    )
    assert "Paris" in reply["choices"][0]["message"]["content"]
    chunks = list(
        model.chat(messages=[{"role": "user", "content": "Hi"}], generate_config={"stream": True, "max_tokens": 4})
    )
    assert chunks and chunks[0]["model"] == model_uid


def test_official_client_launch_and_terminate(official: RESTfulClient) -> None:
    uid = official.launch_model(
        model_name="smollm2-instruct", model_engine="llama.cpp", model_uid="official-2", n_ctx=2048
    )
    try:
        assert uid == "official-2"
        assert official.describe_model(uid)["engine_config"]["n_ctx"] == 2048
        reply = official.get_model(uid).generate("The capital of France is", {"max_tokens": 4, "temperature": 0})
        assert reply["usage"]["completion_tokens"] > 0
    finally:
        official.terminate_model(uid)
    assert "official-2" not in official.list_models()
    with pytest.raises(RuntimeError, match="official-2"):
        official.describe_model("official-2")


def test_official_client_reads_error_detail(official: RESTfulClient) -> None:
    with pytest.raises(RuntimeError, match="unknown engine"):
        official.launch_model(model_name="smollm2-instruct", model_engine="warp-drive")
