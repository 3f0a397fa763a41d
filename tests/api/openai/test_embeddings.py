"""``POST /v1/embeddings`` on the shared server with the bundled all-MiniLM-L6-v2: OpenAI SDK and raw HTTP,
input shapes, encodings, dimensions, errors, and the wrong-type 400s in both directions."""

from __future__ import annotations

import base64
import struct
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tests.api.openapi_schema import assert_matches_openapi  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402

UID = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def embedding_uid(local_server: LocalServer):
    response = httpx.post(
        f"{local_server.api}/models", json={"model_name": UID, "model_type": "embedding"}, timeout=120
    )
    assert response.status_code == 200, response.text
    assert response.json()["model_engine"] == "sentence_transformers"
    info = httpx.get(f"{local_server.api}/models/{UID}", timeout=10).json()
    assert info["model_type"] == "embedding" and info["model_ability"] == ["embed"]
    assert info["max_tokens"] == 256 and info["dimensions"] == 384  # as Xinference describes embedding models
    yield UID
    httpx.delete(f"{local_server.api}/models/{UID}", timeout=60)


def post(server: LocalServer, body: dict) -> httpx.Response:
    return httpx.post(f"{server.api}/embeddings", json=body, timeout=60)


def test_openai_sdk_embeddings_are_semantic(local_server: LocalServer, embedding_uid: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    reply = client.embeddings.create(
        model=embedding_uid,
        input=["The weather is lovely today.", "It is sunny and warm outside.", "He drove the truck to the depot."],
    )
    vectors = np.array([d.embedding for d in reply.data])
    assert vectors.shape == (3, 384) and reply.model == embedding_uid
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > 0
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > unrelated + 0.2, (similar, unrelated)
    floats = client.embeddings.create(
        model=embedding_uid, input="The weather is lovely today.", encoding_format="float"
    )
    assert np.allclose(floats.data[0].embedding, vectors[0], atol=1e-5)


def test_raw_http_shapes(local_server: LocalServer, embedding_uid: str) -> None:
    one = post(local_server, {"model": embedding_uid, "input": "hello world"})
    assert one.status_code == 200, one.text
    body = one.json()
    assert body["object"] == "list" and body["data"][0]["object"] == "embedding" and body["data"][0]["index"] == 0
    assert len(body["data"][0]["embedding"]) == 384 and body["usage"]["prompt_tokens"] == 4  # [CLS] hello world [SEP]
    vector = body["data"][0]["embedding"]

    b64 = post(local_server, {"model": embedding_uid, "input": ["hello world"], "encoding_format": "base64"}).json()
    assert np.allclose(struct.unpack("<384f", base64.b64decode(b64["data"][0]["embedding"])), vector, atol=1e-6)

    ids = [7592, 2088]  # "hello world" in the model's own vocabulary
    for tokens in (ids, [ids]):
        from_ids = post(local_server, {"model": embedding_uid, "input": tokens})
        assert from_ids.status_code == 200, from_ids.text
        assert np.allclose(from_ids.json()["data"][0]["embedding"], vector, atol=1e-5)

    same = post(local_server, {"model": embedding_uid, "input": "hello world", "dimensions": 384})
    assert same.status_code == 200
    for answer in (body, b64):  # both encodings match the schema the OpenAPI document publishes
        assert_matches_openapi(local_server.endpoint, "post", "/v1/embeddings", answer)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": "x", "dimensions": 64}, "dimensions"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"input": [[99999999]]}, "input"),
    ],
)
def test_bad_requests_are_400(local_server: LocalServer, embedding_uid: str, body: dict, param: str) -> None:
    response = post(local_server, {"model": embedding_uid, **body})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_unknown_model_is_404(local_server: LocalServer) -> None:
    assert post(local_server, {"model": "no-such-embedder", "input": "x"}).status_code == 404


def test_wrong_model_type_names_both(local_server: LocalServer, embedding_uid: str, model_uid: str) -> None:
    on_chat = post(local_server, {"model": model_uid, "input": "x"})
    assert on_chat.status_code == 400
    message = on_chat.json()["error"]["message"]
    assert model_uid in message and "LLM" in message and "embeddings" in message
    assert on_chat.json()["error"]["code"] == "wrong_model_type"

    chat = httpx.post(
        f"{local_server.api}/chat/completions",
        timeout=30,
        json={"model": embedding_uid, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert chat.status_code == 400
    assert "embedding" in chat.json()["error"]["message"] and "chat" in chat.json()["error"]["message"]


def test_concurrent_clients_get_their_own_vectors(local_server: LocalServer, embedding_uid: str) -> None:
    texts = [f"concurrent sentence number {i} about topic {i % 4}" for i in range(16)]
    solo = {
        t: post(local_server, {"model": embedding_uid, "input": t}).json()["data"][0]["embedding"] for t in texts[:3]
    }
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(16) as pool:
        replies = list(
            pool.map(
                lambda t: client.post(f"{local_server.api}/embeddings", json={"model": embedding_uid, "input": t}),
                texts,
            )
        )
    assert all(r.status_code == 200 for r in replies)
    for text, reply in zip(texts[:3], replies[:3], strict=True):
        assert np.allclose(reply.json()["data"][0]["embedding"], solo[text], atol=1e-4)


def test_platform_client_embeddings_and_cli_launch_type(local_server: LocalServer, embedding_uid: str) -> None:
    from click.testing import CliRunner

    from xinference.cli.main import main as cli
    from xinference.client import Client, ClientError

    with Client(local_server.endpoint) as client:
        result = client.embeddings(embedding_uid, ["a cat sits on the mat", "a kitten rests on a rug"])
        assert [len(d["embedding"]) for d in result["data"]] == [384, 384]
        with pytest.raises(ClientError) as caught:
            client.embeddings("smollm2-instruct", "x")
        assert caught.value.status_code == 400
    listed = CliRunner().invoke(cli, ["list", "-e", local_server.endpoint])
    assert embedding_uid in listed.output and "embedding" in listed.output
    launched = CliRunner().invoke(
        cli, ["launch", "-e", local_server.endpoint, "-n", UID, "-t", "embedding", "-u", "cli-embed"]
    )
    assert launched.exit_code == 0, launched.output
    try:
        assert "sentence_transformers" in launched.output
    finally:
        CliRunner().invoke(cli, ["terminate", "-e", local_server.endpoint, "-u", "cli-embed"])
