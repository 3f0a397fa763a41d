"""OpenAI chat fields beyond the ones engines use, through the real server: ``reasoning_effort`` switches thinking,
the deprecated ``functions``/``function_call`` work as ``tools``/``tool_choice``, outputs no engine here can make
(``audio``, ``modalities`` beyond text, ``prediction``) are a 400 naming the field, and harmless fields pass.

``reasoning_effort`` is checked on a registered "thinking" variant of the bundled SmolLM2 GGUF (llama.cpp) whose
template opens a ``<think>`` block unless ``enable_thinking`` is false: with thinking on the answer comes back as
``reasoning_content``, with it off as ``content``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
THINKING = "smollm2-thinking-effort"
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def http(local_server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=local_server.api, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def thinking_model(http: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("thinking-weights")
    os.symlink(
        resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1"),
        folder / "smol-thinking.Q4_1.gguf",
    )
    family = {
        "model_name": THINKING,
        "model_ability": ["chat", "reasoning"],
        "context_length": 2048,
        "chat_template": TEMPLATE,
        "reasoning_start_tag": "<think>",
        "reasoning_end_tag": "</think>",
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantizations": ["Q4_1"],
                "model_uri": f"file://{folder}",
            }
        ],
    }
    registered = http.post("/model_registrations/LLM", json={"model": family})
    assert registered.status_code == 200, registered.text
    try:
        launched = http.post(
            "/models", json={"model_name": THINKING, "model_engine": "llama.cpp", "n_ctx": 1024, "n_parallel": 1}
        )
        assert launched.status_code == 200, launched.text
        yield THINKING
    finally:
        http.delete(f"/models/{THINKING}")
        http.delete(f"/model_registrations/LLM/{THINKING}")


def _chat(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post("/chat/completions", json=body)


def _error(response: httpx.Response, param: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    assert param in error["message"], error["message"]
    return error


def test_reasoning_effort_switches_thinking(http: httpx.Client, thinking_model: str) -> None:
    def ask(**extra: Any) -> dict[str, Any]:
        response = _chat(http, model=thinking_model, messages=QUESTION, max_tokens=20, temperature=0, **extra)
        assert response.status_code == 200, response.text
        reply: dict[str, Any] = response.json()
        return reply

    for effort in ("none", "minimal"):
        off = ask(reasoning_effort=effort)
        message = off["choices"][0]["message"]
        assert "Paris" in message["content"] and "think>" not in message["content"], (effort, message)
        assert not message.get("reasoning_content")
    on = ask(reasoning_effort="high")
    assert "Paris" in on["choices"][0]["message"]["reasoning_content"] and not on["choices"][0]["message"]["content"]
    assert off["usage"]["prompt_tokens"] > on["usage"]["prompt_tokens"]  # the template closed the block itself
    # an explicit switch wins over the effort, at the top level or in chat_template_kwargs
    explicit = ask(reasoning_effort="none", enable_thinking=True)["choices"][0]["message"]
    assert "Paris" in explicit["reasoning_content"]
    kwargs = ask(reasoning_effort="high", chat_template_kwargs={"enable_thinking": False})["choices"][0]["message"]
    assert "Paris" in kwargs["content"] and not kwargs.get("reasoning_content")
    _error(_chat(http, model=thinking_model, messages=QUESTION, reasoning_effort="extreme"), "reasoning_effort")


def test_legacy_functions_become_tools(http: httpx.Client, model_uid: str) -> None:
    asked = [{"role": "user", "content": "What is the weather in Paris?"}]
    response = _chat(
        http,
        model=model_uid,
        messages=asked,
        max_tokens=64,
        temperature=0,
        functions=[WEATHER],
        function_call={"name": "get_weather"},
    )
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    call = choice["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and isinstance(json.loads(call["arguments"]).get("city"), str)
    # the legacy round trip: the assistant's function_call, then the function's result
    history = [
        *asked,
        {"role": "assistant", "content": None, "function_call": call},
        {"role": "function", "name": "get_weather", "content": "Sunny, 21 degrees."},
    ]
    follow = _chat(
        http, model=model_uid, messages=history, max_tokens=24, temperature=0, functions=[WEATHER], function_call="none"
    )
    assert follow.status_code == 200, follow.text
    assert follow.json()["choices"][0]["message"]["content"]
    _error(
        _chat(
            http,
            model=model_uid,
            messages=asked,
            functions=[WEATHER],
            tools=[{"type": "function", "function": WEATHER}],
        ),
        "functions",
    )
    _error(_chat(http, model=model_uid, messages=asked, function_call={"name": "get_weather"}), "function_call")
    _error(_chat(http, model=model_uid, messages=asked, functions=[WEATHER], function_call="always"), "function_call")


@pytest.mark.parametrize(
    "field,value",
    [
        ("audio", {"voice": "alloy", "format": "wav"}),
        ("modalities", ["text", "audio"]),
        ("prediction", {"type": "content", "content": "The capital of France is Paris."}),
    ],
)
def test_outputs_no_engine_makes_are_400(http: httpx.Client, model_uid: str, field: str, value: Any) -> None:
    error = _error(_chat(http, model=model_uid, messages=QUESTION, max_tokens=4, **{field: value}), field)
    assert error["code"] == "unsupported_option"


def test_harmless_fields_are_accepted(http: httpx.Client, model_uid: str) -> None:
    response = _chat(
        http,
        model=model_uid,
        messages=QUESTION,
        max_tokens=4,
        user="u-1",
        store=False,
        metadata={"run": "ci"},
        service_tier="auto",
        parallel_tool_calls=True,
        modalities=["text"],
        prompt_cache_key="k",
        safety_identifier="s",
        some_future_field=1,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] is not None


def test_legacy_turns_become_tool_turns() -> None:
    """What the engines receive for a conversation in the legacy form (no server needed)."""
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    params = ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "functions": [WEATHER],
            "function_call": "auto",
            "messages": [
                QUESTION[0],
                {"role": "assistant", "content": None, "function_call": call},
                {"role": "function", "name": "get_weather", "content": "Sunny."},
            ],
        }
    ).to_engine_params()
    assert params["tools"] == [{"type": "function", "function": WEATHER}] and params["tool_choice"] == "auto"
    assistant, result = params["messages"][1:]
    assert "function_call" not in assistant and assistant["tool_calls"][0]["function"] == call
    assert result == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "name": "get_weather",
        "content": "Sunny.",
    }
    effort = ChatCompletionRequest.model_validate({"model": "m", "messages": QUESTION, "reasoning_effort": "minimal"})
    assert effort.to_engine_params()["enable_thinking"] is False
