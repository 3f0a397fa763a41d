"""Chat templates over the renderer's limits, over HTTP on the shared server: the preview route answers each with a
400 in the API's error shape and the server keeps serving, previews render off the default executor, and a model
whose template exceeds a limit on one request answers that request with a 400 and keeps serving the next."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer
from xinference.model.chat_template import find_chat_template
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

HOSTILE = {
    "{{ 'a' * 10**7 }}": "longer than 1 MiB",
    "{{ range(10**9)|list }}": "range of more than 100,000 items",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}": "recursed deeper than 64",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}": (
        "looped more than 1,000,000 times|ran longer than 5 s"
    ),
    "{% for i in range(100000) %}" + "x" * 100 + "{% endfor %}": "output exceeds 1 MiB",
}
#: loops until the renderer's 5 s deadline: work without output, so only the time limit can stop it (a loop making
#: output reached the 1 MiB output limit before 5 s on a quiet machine: the test depended on the machine's speed)
SLOW = "{% for i in range(100000) %}{% for j in range(9) %}{% set _ = ('x' * 100000).upper() %}{% endfor %}{% endfor %}"


def _chat(server: LocalServer, model: str, **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{server.api}/chat/completions",
        timeout=120,
        json={
            "model": model,
            "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 4,
            "temperature": 0,
            **extra,
        },
    )


def test_preview_refuses_each_limit_with_a_400_and_the_server_keeps_serving(local_server: LocalServer) -> None:
    url = f"{local_server.api}/chat_templates/render"
    for template, words in HOSTILE.items():
        reply = httpx.post(url, json={"chat_template": template}, timeout=30)
        assert reply.status_code == 400, (template, reply.text)
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["code"] == "chat_template_limit"
        assert any(word in error["message"] for word in words.split("|")), error["message"]
    fine = httpx.post(url, json={"chat_template": "{% for m in messages %}{{ m.role }}|{% endfor %}"}, timeout=10)
    assert fine.status_code == 200 and fine.json()["prompt"] == "system|user|assistant|user|"
    assert httpx.get(f"{local_server.api}/models", timeout=10).status_code == 200
    assert _chat(local_server, DEFAULT_MODEL).status_code == 200


def test_slow_previews_do_not_hold_the_api(local_server: LocalServer) -> None:
    url = f"{local_server.api}/chat_templates/render"
    replies: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: replies.append(httpx.post(url, json={"chat_template": SLOW}, timeout=60)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert httpx.get(f"{local_server.api}/models", timeout=10).status_code == 200
    assert httpx.get(f"{local_server.api}/cluster/info", timeout=10).status_code == 200
    answered = time.monotonic() - started
    for thread in threads:
        thread.join(60)
    assert [r.status_code for r in replies] == [400, 400]
    assert all("ran longer than 5 s" in r.json()["error"]["message"] for r in replies)
    assert answered < 3, f"the API took {answered:.1f} s while two previews rendered"


@pytest.mark.slow
def test_a_request_over_a_limit_is_a_400_and_the_model_keeps_serving(local_server: LocalServer, tmp_path) -> None:
    """llama.cpp renders a reasoning family's template in Python too (is the prompt inside a think block?); a
    request whose template variables make that render exceed a limit is refused, and the model serves on."""
    smollm2 = ModelRegistry().get(DEFAULT_MODEL)
    path = resolve_model_path(smollm2.model_specs[0], "Q4_1")
    os.symlink(path, tmp_path / "probe.Q4_1.gguf")
    template = "{% if boom %}{{ 'a' * 10000000 }}{% endif %}" + (find_chat_template(smollm2, path) or "")
    name = "render-limit-probe"
    family = {
        "model_name": name,
        "model_ability": ["chat"],
        "context_length": 2048,
        "chat_template": template,
        "reasoning_start_tag": "<think>",
        "reasoning_end_tag": "</think>",
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantizations": ["Q4_1"],
                "model_uri": f"file://{tmp_path}",
            }
        ],
    }
    registered = httpx.post(
        f"{local_server.api}/model_registrations/LLM", timeout=30, json={"model": json.dumps(family), "persist": False}
    )
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{local_server.api}/models",
            timeout=180,
            json={"model_name": name, "model_engine": "llama.cpp", "model_uid": name, "n_ctx": 2048},
        )
        assert launched.status_code == 200, launched.text
        refused = _chat(local_server, name, chat_template_kwargs={"boom": True})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "chat_template_limit"
        reserved = _chat(local_server, name, chat_template_kwargs={"messages": []})
        assert reserved.status_code == 400 and reserved.json()["error"]["param"] == "chat_template_kwargs"
        served = _chat(local_server, name)
        assert served.status_code == 200, served.text
        assert served.json()["usage"]["completion_tokens"] > 0
    finally:
        httpx.delete(f"{local_server.api}/models/{name}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{name}", timeout=30)
