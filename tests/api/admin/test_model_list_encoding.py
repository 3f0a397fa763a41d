"""``GET /v1/models`` and ``GET /v1/models/{uid}`` send the supervisor's plain dicts in one ``json.dumps`` pass:
FastAPI's ``jsonable_encoder`` walking every nested value cost ~1.7 s per listing at 1,000 models
(``benchmark/results/scale.md``). It is still there for a value JSON cannot encode, and only for that value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from xinference.api.admin.models import router as models_router
from xinference.api.admin.models.protocol import ModelCard, ModelList
from xinference.api.admin.models.serving import model_entry
from xinference.api.app import create_app


def _info(uid: str, **fields: Any) -> dict[str, Any]:
    """An entry as ``ModelRecord.info`` builds it (the fields the listing and its schema use)."""
    info = {
        "id": uid,
        "object": "model",
        "created": 1700000000,
        "owned_by": "xinference",
        "model_uid": uid,
        "model_type": "LLM",
        "model_name": "smollm2-instruct",
        "model_lang": ["en"],
        "model_ability": ["chat"],
        "model_description": "Pequeño modelo — 小模型",
        "model_format": "ggufv2",
        "model_size_in_billions": "1_7",
        "quantization": "Q4_K_M",
        "model_engine": "llama.cpp",
        "context_length": 8192,
        "tool_call_format": "hermes",
        "reasoning_tags": None,
        "replica": 2,
        "status": "ready",
        "address": "10.0.0.1:9000",
        "replicas": [
            {
                "replica_uid": f"{uid}-0",
                "worker_address": "10.0.0.1:9000",
                "address": "10.0.0.1:9001",
                "pid": 11,
                "gpu_indices": [0],
            }
        ],
        "accelerators": ["10.0.0.1:9000/gpu0"],
        "engine_config": {"n_ctx": 4096, "kv_unified": True},
        "keep_alive": "forever",
        "autostart": False,
        "load_seconds": 1.25,
    }
    return {**info, **fields}


class _Models:
    """Stands in for ModelsService: the listing and a card, as the supervisor's dicts become them."""

    def __init__(self, infos: list[dict[str, Any]]) -> None:
        self.infos = infos

    async def list(self) -> dict[str, Any]:
        return {"object": "list", "data": [{**model_entry(i), "requests_in_flight": 0} for i in self.infos]}

    async def describe(self, model_uid: str) -> dict[str, Any]:
        return model_entry(next(i for i in self.infos if i["model_uid"] == model_uid))


@pytest.fixture()
def encoder_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = models_router.jsonable_encoder

    def counting(value: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(models_router, "jsonable_encoder", counting)
    return calls


def _client(infos: list[dict[str, Any]]) -> TestClient:
    app = create_app("127.0.0.1:1")
    app.state.models = _Models(infos)
    return TestClient(app, base_url="http://127.0.0.1")  # no lifespan: no supervisor needed


def test_the_listing_is_encoded_in_one_pass(encoder_calls: list[Any]) -> None:
    infos = [_info(f"m{i}") for i in range(50)]
    reply = _client(infos).get("/v1/models")
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    assert encoder_calls == []  # plain dicts: no walk over every value
    body = reply.json()
    expected = json.loads(
        json.dumps({"object": "list", "data": [{**model_entry(i), "requests_in_flight": 0} for i in infos]})
    )
    assert body == expected
    ModelList.model_validate(body)  # the documented shape
    assert "Pequeño modelo — 小模型".encode() in reply.content  # UTF-8 as it was, not \\u escapes
    assert body["data"][0]["context_length"] == 4096 and body["data"][0]["abilities"] == ["chat", "tools"]


def test_a_card_is_encoded_in_one_pass(encoder_calls: list[Any]) -> None:
    reply = _client([_info("a"), _info("b", status="launching")]).get("/v1/models/b")
    assert reply.status_code == 200 and encoder_calls == []
    card = ModelCard.model_validate(reply.json())
    assert card.model_uid == "b" and card.status == "launching"


def test_a_value_json_cannot_encode_is_converted_alone(encoder_calls: list[Any]) -> None:
    odd = _info("p", engine_config={"n_ctx": 2048, "model_path": Path("/models/x.gguf"), "tags": {"a"}})
    reply = _client([odd]).get("/v1/models")
    assert reply.status_code == 200
    config = reply.json()["data"][0]["engine_config"]
    assert config == {"n_ctx": 2048, "model_path": "/models/x.gguf", "tags": ["a"]}
    assert sorted(type(v).__name__ for v in encoder_calls) == sorted([type(Path("/")).__name__, "set"])
