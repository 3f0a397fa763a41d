"""Issue 13, item 1: registrations written as the original Xinference documents them are accepted.

Both of its JSON versions (1: ``quantizations`` per spec; 2: one ``quantization`` per spec, ``model_hub``,
``virtualenv``, nulls for unset fields), for LLM, embedding and rerank; Xinference's names are mapped onto ours,
fields with no meaning here are kept and read back, and a field nobody knows is still a 400 that names it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import pytest

from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

VIRTUALENV = {
    "packages": [],
    "inherit_pip_config": True,
    "index_url": None,
    "extra_index_url": None,
    "find_links": None,
    "trusted_host": None,
    "no_build_isolation": None,
}


@pytest.fixture(scope="module")
def gguf_folder(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("xinf-json-gguf")
    source = resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1")
    os.symlink(source, folder / "tiny-chat.Q4_1.gguf")
    return str(folder)


@pytest.fixture(scope="module")
def minilm_folder() -> str:
    return resolve_model_path(ModelRegistry().get("all-MiniLM-L6-v2").model_specs[0], "none")


def llm_v2(name: str, folder: str) -> dict[str, Any]:
    """An LLM as Xinference's current docs write one (version 2), pointing at local GGUF weights."""
    return {
        "version": 2,
        "context_length": 2048,
        "model_name": name,
        "model_lang": ["en", "zh"],
        "model_ability": ["chat", "generate"],
        "model_description": "registered the Xinference way",
        "model_family": "qwen2.5-instruct",
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantization": "Q4_1",
                "model_id": None,
                "model_hub": "huggingface",
                "model_uri": f"file://{folder}",
                "model_revision": None,
                "activated_size_in_billions": None,
                "model_file_name_template": "tiny-chat.{quantization}.gguf",
            }
        ],
        "chat_template": None,
        "stop_token_ids": None,
        "stop": None,
        "reasoning_start_tag": None,
        "reasoning_end_tag": None,
        "cache_config": None,
        "virtualenv": VIRTUALENV,
        "is_builtin": False,
    }


def llm_v1(name: str, folder: str) -> dict[str, Any]:
    """The older form (version 1): a list of quantizations per spec, tool_parser and architectures."""
    return {
        "version": 1,
        "context_length": 2048,
        "model_name": name,
        "model_lang": ["en"],
        "model_ability": ["chat", "generate", "tools"],
        "model_family": "my-own-family",
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantizations": ["Q4_1"],
                "model_id": "someone/tiny-chat-GGUF",
                "model_uri": f"file://{folder}",
                "model_file_name_template": "tiny-chat.{quantization}.gguf",
            }
        ],
        "chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        "stop_token_ids": [2],
        "stop": ["<|im_end|>"],
        "tool_parser": "qwen",
        "architectures": ["LlamaForCausalLM"],
    }


def register(api: str, kind: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{api}/model_registrations/{kind}", json={"model": json.dumps(body), "persist": False}, timeout=30
    )


@pytest.mark.slow  # launches a model process
def test_version_2_llm_registers_launches_and_chats(local_server, gguf_folder: str) -> None:
    api = local_server.api
    response = register(api, "LLM", llm_v2("xinf-v2-chat", gguf_folder))
    assert response.status_code == 200, response.text
    try:
        got = httpx.get(f"{api}/model_registrations/LLM/xinf-v2-chat").json()
        assert got["model_specs"][0]["quantizations"] == ["Q4_1"]
        kept = got["kept_fields"]
        assert kept["virtualenv"] == VIRTUALENV and kept["model_family"] == "qwen2.5-instruct"
        # model_family names a built-in family: its stops and tool-call format are used when the registration has none
        assert got["tool_call_format"] == "hermes" and "<|im_end|>" in got["stop"]
        launched = httpx.post(f"{api}/models", json={"model_name": "xinf-v2-chat"}, timeout=120)
        assert launched.status_code == 200, launched.text
        try:
            reply = httpx.post(
                f"{api}/chat/completions",
                timeout=60,
                json={
                    "model": "xinf-v2-chat",
                    "temperature": 0,
                    "max_tokens": 12,
                    "messages": [{"role": "user", "content": "What is the capital of France?"}],
                },
            )
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"]
        finally:
            httpx.delete(f"{api}/models/xinf-v2-chat", timeout=60)
    finally:
        httpx.delete(f"{api}/model_registrations/LLM/xinf-v2-chat")


def test_version_1_llm_maps_tool_parser_and_keeps_family(local_server, gguf_folder: str) -> None:
    api = local_server.api
    response = register(api, "LLM", llm_v1("xinf-v1-chat", gguf_folder))
    assert response.status_code == 200, response.text
    try:
        got = httpx.get(f"{api}/model_registrations/LLM/xinf-v1-chat").json()
        assert got["tool_call_format"] == "qwen" and got["stop"] == ["<|im_end|>"] and got["stop_token_ids"] == [2]
        assert got["architectures"] == ["LlamaForCausalLM"] and got["kept_fields"] == {"model_family": "my-own-family"}
    finally:
        httpx.delete(f"{api}/model_registrations/LLM/xinf-v1-chat")


def test_version_2_one_spec_per_quantization_become_one_spec(local_server, gguf_folder: str) -> None:
    body = llm_v2("xinf-v2-quants", gguf_folder)
    second = {**body["model_specs"][0], "quantization": "Q8_0"}
    body["model_specs"].append(second)
    response = register(local_server.api, "LLM", body)
    assert response.status_code == 200, response.text
    try:
        got = httpx.get(f"{local_server.api}/model_registrations/LLM/xinf-v2-quants").json()
        assert [s["quantizations"] for s in got["model_specs"]] == [["Q4_1", "Q8_0"]]
    finally:
        httpx.delete(f"{local_server.api}/model_registrations/LLM/xinf-v2-quants")


@pytest.mark.slow  # launches a model process
def test_version_2_embedding_and_rerank_register(local_server, minilm_folder: str) -> None:
    api = local_server.api
    embedding = {
        "version": 2,
        "model_name": "xinf-my-embedder",
        "dimensions": 384,
        "max_tokens": 256,
        "language": ["en"],
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_hub": "huggingface",
                "model_id": None,
                "model_uri": f"file://{minilm_folder}",
                "model_revision": None,
                "quantization": "none",
            }
        ],
        "cache_config": None,
        "virtualenv": VIRTUALENV,
        "is_builtin": False,
    }
    rerank = {
        "version": 2,
        "model_name": "xinf-my-reranker",
        "language": ["en", "zh"],
        "type": "unknown",
        "max_tokens": 512,
        "virtualenv": VIRTUALENV,
        "is_builtin": False,
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_hub": "huggingface",
                "model_id": None,
                "model_revision": None,
                "model_uri": f"file://{minilm_folder}",
                "quantization": "none",
            }
        ],
    }
    assert register(api, "embedding", embedding).status_code == 200
    assert register(api, "rerank", rerank).status_code == 200
    try:
        got = httpx.get(f"{api}/model_registrations/embedding/xinf-my-embedder").json()
        assert got["dimensions"] == 384 and got["model_lang"] == ["en"] and got["model_ability"] == ["embed"]
        launched = httpx.post(
            f"{api}/models", json={"model_name": "xinf-my-embedder", "model_type": "embedding"}, timeout=120
        )
        assert launched.status_code == 200, launched.text
        try:
            vectors = httpx.post(
                f"{api}/embeddings", json={"model": "xinf-my-embedder", "input": "hello"}, timeout=60
            ).json()
            assert len(vectors["data"][0]["embedding"]) == 384
        finally:
            httpx.delete(f"{api}/models/xinf-my-embedder", timeout=60)
        got = httpx.get(f"{api}/model_registrations/rerank/xinf-my-reranker").json()
        assert got["model_ability"] == ["rerank"] and got["kept_fields"]["type"] == "unknown"
    finally:
        httpx.delete(f"{api}/model_registrations/embedding/xinf-my-embedder")
        httpx.delete(f"{api}/model_registrations/rerank/xinf-my-reranker")


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda b: b.update(surprise=1), "surprise"),
        (lambda b: b["model_specs"][0].update(mystery_knob=3), "mystery_knob"),
        (lambda b: b.update(version=7), "version"),
        (lambda b: b["model_specs"][0].update(model_hub="somewhere-else", model_uri=None, model_id="a/b"), "model_hub"),
    ],
)
def test_unknown_fields_are_still_refused_by_name(local_server, gguf_folder: str, change, needle: str) -> None:
    body = llm_v2("xinf-bad", gguf_folder)
    change(body)
    response = register(local_server.api, "LLM", body)
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"]["message"]


@pytest.mark.slow  # launches a model process
def test_launch_by_path_of_a_builtin_family_without_registration(local_server, gguf_folder: str) -> None:
    """Xinference's launch-by-path: ``model_name`` of a built-in family plus ``model_path`` of local weights."""
    api = local_server.api
    launched = httpx.post(
        f"{api}/models",
        timeout=180,
        json={
            "model_engine": "llama.cpp",
            "model_name": "smollm2-instruct",
            "model_uid": "by-path",
            "model_path": os.path.join(gguf_folder, "tiny-chat.Q4_1.gguf"),
        },
    )
    assert launched.status_code == 200, launched.text
    try:
        reply = httpx.post(
            f"{api}/chat/completions",
            timeout=60,
            json={"model": "by-path", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0, reply.text
    finally:
        httpx.delete(f"{api}/models/by-path", timeout=60)
    missing = httpx.post(
        f"{api}/models",
        timeout=60,
        json={
            "model_engine": "llama.cpp",
            "model_name": "smollm2-instruct",
            "model_uid": "by-path-missing",
            "model_path": "/no/such/weights.gguf",
        },
    )
    assert missing.status_code == 400 and "model_path" in missing.json()["error"]["message"]
