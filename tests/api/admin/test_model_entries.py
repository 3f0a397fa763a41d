"""``/v1/models`` entries: OpenAI's list shape, plus the context each running model serves, its abilities, engine
and status."""

from __future__ import annotations

from typing import Any

import httpx

from xinference.api.admin.models.serving import model_entry


def _info(**fields: Any) -> dict[str, Any]:
    base = {
        "id": "m",
        "object": "model",
        "created": 1,
        "owned_by": "xinference",
        "model_ability": ["chat"],
        "model_engine": "llama.cpp",
        "status": "ready",
        "context_length": 32768,
        "engine_config": {},
        "tool_call_format": None,
        "reasoning_tags": None,
    }
    return {**base, **fields}


def test_served_context_comes_from_the_engine() -> None:
    assert (
        model_entry(_info(engine_config={"n_ctx": 8192, "kv_unified": True, "n_parallel": 4}))["context_length"] == 8192
    )
    per_slot = model_entry(_info(engine_config={"n_ctx": 8192, "kv_unified": False, "n_parallel": 4}))
    assert per_slot["context_length"] == 2048 and per_slot["model_context_length"] == 32768
    assert model_entry(_info(engine_config={"max_model_len": 4096}))["context_length"] == 4096
    launching = model_entry(_info(status="launching"))
    assert launching["context_length"] == 32768 and launching["status"] == "launching"


def test_abilities_include_what_the_family_declares() -> None:
    entry = model_entry(_info(tool_call_format="hermes", reasoning_tags=["<think>", "</think>"]))
    assert entry["abilities"] == ["chat", "tools", "reasoning"] and entry["model_ability"] == ["chat"]
    assert model_entry(_info())["abilities"] == ["chat"]
    assert model_entry(_info())["engine"] == "llama.cpp"


def test_running_model_entry(local_server, model_uid: str) -> None:
    listing = httpx.get(f"{local_server.api}/models").json()
    assert listing["object"] == "list"
    entry = next(m for m in listing["data"] if m["id"] == model_uid)
    assert {entry["object"], entry["owned_by"]} == {"model", "xinference"} and isinstance(entry["created"], int)
    assert entry["context_length"] == entry["engine_config"]["n_ctx"] and entry["model_context_length"] == 8192
    assert "chat" in entry["abilities"] and entry["engine"] == "llama.cpp" and entry["status"] == "ready"
    described = httpx.get(f"{local_server.api}/models/{model_uid}").json()
    assert described["context_length"] == entry["context_length"] and described["abilities"] == entry["abilities"]
