"""The Messages and Responses APIs on the Transformers engine: the bundled SmolLM2 converted to safetensors,
registered on the shared server (the APIs translate to chat, so every engine answers them the same way)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

import anthropic  # noqa: E402
import openai  # noqa: E402

from benchmark._weights import converted_smollm2  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402

pytestmark = pytest.mark.slow

NAME = "smollm2-agent-apis-tf"
WEATHER = {"name": "get_weather", "description": "Get the current weather of a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def tf_model(local_server: LocalServer) -> Iterator[str]:
    family = {"model_name": NAME, "model_ability": ["chat", "generate"], "context_length": 2048,
              "stop_token_ids": [2], "stop": ["<|im_end|>"], "tool_call_format": "hermes",
              "model_specs": [{"model_format": "pytorch", "model_size_in_billions": "0_135",
                               "quantizations": ["none"], "model_uri": f"file://{converted_smollm2()}"}]}
    registered = httpx.post(f"{local_server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(f"{local_server.api}/models", timeout=180,
                              json={"model_name": NAME, "model_engine": "Transformers", "max_num_seqs": 2})
        assert launched.status_code == 200, launched.text
        yield NAME
    finally:
        httpx.delete(f"{local_server.api}/models/{NAME}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{NAME}", timeout=30)


def test_messages_and_count_tokens(local_server: LocalServer, tf_model: str) -> None:
    client = anthropic.Anthropic(base_url=local_server.endpoint, api_key="x", max_retries=0, timeout=120)
    conversation = [{"role": "user", "content": "What is the capital of France?"}]
    message = client.messages.create(model=tf_model, max_tokens=16, system="You are a helpful assistant.",
                                     messages=conversation, extra_body={"temperature": 0})
    assert "Paris" in message.content[0].text
    counted = client.messages.count_tokens(model=tf_model, system="You are a helpful assistant.",
                                           messages=conversation)
    assert counted.input_tokens == message.usage.input_tokens
    forced = client.messages.create(model=tf_model, max_tokens=96, tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather in Paris?"}], tool_choice={"type": "tool", "name": "get_weather"},
                                    extra_body={"temperature": 0})
    calls = [block for block in forced.content if block.type == "tool_use"]
    assert forced.stop_reason == "tool_use" and calls and isinstance(calls[0].input.get("city"), str)


def test_responses_stream(local_server: LocalServer, tf_model: str) -> None:
    client = openai.OpenAI(base_url=local_server.api, api_key="x", max_retries=0, timeout=120)
    with client.responses.stream(model=tf_model, input="What is the capital of France?", max_output_tokens=32,
                                 temperature=0, instructions="You are a helpful assistant.") as stream:
        final = stream.get_final_response()
    assert "Paris" in final.output_text
    called = client.responses.create(model=tf_model, input="Weather in Rome?", max_output_tokens=96, temperature=0,
                                     tools=[{"type": "function", "name": "get_weather",
                                             "parameters": WEATHER["input_schema"]}], tool_choice="required")
    calls = [item for item in called.output if item.type == "function_call"]
    assert calls and isinstance(json.loads(calls[0].arguments).get("city"), str)
