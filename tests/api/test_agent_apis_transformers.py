"""The Messages and Responses APIs on the Transformers engine: the bundled SmolLM2 converted to safetensors,
registered on the shared server (the APIs translate to chat, so every engine answers them the same way), driven by
the ``anthropic`` and ``openai`` SDKs: plain and streamed answers, counted tokens, a forced call and its result sent
back (``tool_result``, ``function_call_output``), and a conversation continued by ``previous_response_id``."""

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
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
FUNCTION = {"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}
SYSTEM = "You are a helpful assistant."
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def tf_model(local_server: LocalServer) -> Iterator[str]:
    family = {
        "model_name": NAME,
        "model_ability": ["chat", "generate"],
        "context_length": 2048,
        "stop_token_ids": [2],
        "stop": ["<|im_end|>"],
        "tool_call_format": "hermes",
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_135",
                "quantizations": ["none"],
                "model_uri": f"file://{converted_smollm2()}",
            }
        ],
    }
    registered = httpx.post(f"{local_server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{local_server.api}/models",
            timeout=180,
            json={"model_name": NAME, "model_engine": "Transformers", "max_num_seqs": 2},
        )
        assert launched.status_code == 200, launched.text
        yield NAME
    finally:
        httpx.delete(f"{local_server.api}/models/{NAME}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{NAME}", timeout=30)


def test_messages_and_count_tokens(local_server: LocalServer, tf_model: str) -> None:
    client = anthropic.Anthropic(base_url=local_server.endpoint, api_key="x", max_retries=0, timeout=120)
    conversation = [{"role": "user", "content": "What is the capital of France?"}]
    message = client.messages.create(
        model=tf_model,
        max_tokens=16,
        system="You are a helpful assistant.",
        messages=conversation,
        extra_body={"temperature": 0},
    )
    assert "Paris" in message.content[0].text
    counted = client.messages.count_tokens(model=tf_model, system="You are a helpful assistant.", messages=conversation)
    assert counted.input_tokens == message.usage.input_tokens
    forced = client.messages.create(
        model=tf_model,
        max_tokens=96,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body={"temperature": 0},
    )
    calls = [block for block in forced.content if block.type == "tool_use"]
    assert forced.stop_reason == "tool_use" and calls and isinstance(calls[0].input.get("city"), str)


def test_responses_stream(local_server: LocalServer, tf_model: str) -> None:
    client = openai.OpenAI(base_url=local_server.api, api_key="x", max_retries=0, timeout=120)
    with client.responses.stream(
        model=tf_model,
        input="What is the capital of France?",
        max_output_tokens=32,
        temperature=0,
        instructions="You are a helpful assistant.",
    ) as stream:
        final = stream.get_final_response()
    assert "Paris" in final.output_text
    called = client.responses.create(
        model=tf_model,
        input="Weather in Rome?",
        max_output_tokens=96,
        temperature=0,
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}],
        tool_choice="required",
    )
    calls = [item for item in called.output if item.type == "function_call"]
    assert calls and isinstance(json.loads(calls[0].arguments).get("city"), str)


def _anthropic(local_server: LocalServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=local_server.endpoint, api_key="x", max_retries=0, timeout=120)


def _openai(local_server: LocalServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=local_server.api, api_key="x", max_retries=0, timeout=120)


def test_messages_stream(local_server: LocalServer, tf_model: str) -> None:
    client = _anthropic(local_server)
    with client.messages.stream(
        model=tf_model, max_tokens=16, system=SYSTEM, messages=QUESTION, extra_body={"temperature": 0}
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    plain = client.messages.create(
        model=tf_model, max_tokens=16, system=SYSTEM, messages=QUESTION, extra_body={"temperature": 0}
    )
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert events.count("content_block_start") == events.count("content_block_stop") == 1
    assert events.count("text") > 1  # the SDK's per-delta event: the text came in pieces
    assert [block.type for block in final.content] == ["text"] and "Paris" in final.content[0].text
    assert final.content[0].text == plain.content[0].text  # greedy: streamed and whole answers agree
    assert final.stop_reason == plain.stop_reason and final.usage.input_tokens == plain.usage.input_tokens
    assert final.usage.output_tokens == plain.usage.output_tokens > 0


def test_messages_tool_result_round_trip(local_server: LocalServer, tf_model: str) -> None:
    client = _anthropic(local_server)
    asked = [{"role": "user", "content": "What is the weather in Paris?"}]
    forced = client.messages.create(
        model=tf_model,
        max_tokens=96,
        tools=[WEATHER],
        messages=asked,
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body={"temperature": 0},
    )
    [call] = [block for block in forced.content if block.type == "tool_use"]
    conversation = [
        *asked,
        {"role": "assistant", "content": forced.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 degrees."}]},
    ]
    answer = client.messages.create(
        model=tf_model,
        max_tokens=24,
        tools=[WEATHER],
        messages=conversation,
        tool_choice={"type": "none"},
        extra_body={"temperature": 0},
    )
    assert answer.stop_reason in ("end_turn", "max_tokens")
    assert [block.type for block in answer.content] == ["text"] and answer.content[0].text.strip()
    counted = client.messages.count_tokens(
        model=tf_model, tools=[WEATHER], messages=conversation, tool_choice={"type": "none"}
    )
    assert counted.input_tokens == answer.usage.input_tokens > forced.usage.input_tokens  # the call and result count
    with pytest.raises(anthropic.BadRequestError, match="tool_use_id"):
        client.messages.create(
            model=tf_model,
            max_tokens=8,
            messages=[
                *asked,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "?"}]},
            ],
        )


def test_responses_function_call_output_round_trip(local_server: LocalServer, tf_model: str) -> None:
    client = _openai(local_server)
    called = client.responses.create(
        model=tf_model,
        input="Weather in Rome?",
        max_output_tokens=96,
        temperature=0,
        tools=[FUNCTION],
        tool_choice="required",
        store=False,
    )
    [call] = [item for item in called.output if item.type == "function_call"]
    answered = client.responses.create(
        model=tf_model,
        max_output_tokens=24,
        temperature=0,
        tools=[FUNCTION],
        tool_choice="none",
        store=False,
        input=[
            {"role": "user", "content": "Weather in Rome?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 degrees."},
        ],
    )
    assert answered.output_text.strip() and not [item for item in answered.output if item.type == "function_call"]
    assert answered.usage.input_tokens > called.usage.input_tokens
    with pytest.raises(openai.NotFoundError):  # store=False kept nothing
        client.responses.retrieve(called.id)
    with pytest.raises(openai.BadRequestError, match="call_id"):
        client.responses.create(
            model=tf_model,
            max_output_tokens=8,
            input=[{"type": "function_call_output", "call_id": "call_unknown", "output": "?"}],
        )


def test_previous_response_id_continues_the_conversation(local_server: LocalServer, tf_model: str) -> None:
    client = _openai(local_server)
    called = client.responses.create(
        model=tf_model,
        input="Weather in Rome?",
        max_output_tokens=96,
        temperature=0,
        tools=[FUNCTION],
        tool_choice="required",
    )
    [call] = [item for item in called.output if item.type == "function_call"]
    # the call's output alone: its call_id is found in the stored conversation of the previous response
    answered = client.responses.create(
        model=tf_model,
        previous_response_id=called.id,
        max_output_tokens=24,
        temperature=0,
        tools=[FUNCTION],
        tool_choice="none",
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 degrees."}],
    )
    assert answered.output_text.strip() and answered.previous_response_id == called.id
    assert answered.usage.input_tokens > called.usage.input_tokens  # the stored call and its output are prompt now
    # the same tools again, so that the prompts differ by the conversation only: it holds the whole previous answer
    again = client.responses.create(
        model=tf_model,
        previous_response_id=answered.id,
        input="And in Paris?",
        max_output_tokens=8,
        temperature=0,
        tools=[FUNCTION],
        tool_choice="none",
    )
    assert again.usage.input_tokens > answered.usage.input_tokens + answered.usage.output_tokens
    assert client.responses.retrieve(again.id).output_text == again.output_text
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=tf_model, previous_response_id="resp_unknown", input="Hi", max_output_tokens=4)
