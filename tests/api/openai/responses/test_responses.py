"""The OpenAI Responses API through the real server, driven by the ``openai`` SDK (SmolLM2 on llama.cpp)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def client(local_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=local_server.api, api_key="not-needed", max_retries=0, timeout=120)


def test_create_and_retrieve(client: openai.OpenAI, model_uid: str) -> None:
    response = client.responses.create(
        model=model_uid,
        input=QUESTION,
        instructions="You are a helpful assistant.",
        max_output_tokens=32,
        temperature=0,
    )
    assert response.object == "response" and response.model == model_uid
    assert response.status in ("completed", "incomplete") and "Paris" in response.output_text
    assert response.output[0].type == "message" and response.output[0].role == "assistant"
    assert response.usage.input_tokens > 5 and 0 < response.usage.output_tokens <= 32
    assert response.instructions == "You are a helpful assistant."
    again = client.responses.retrieve(response.id)
    assert again.id == response.id and again.output_text == response.output_text
    items = list(client.responses.input_items.list(response.id))
    assert len(items) == 1 and items[0].type == "message" and items[0].content[0].text == QUESTION


def test_cut_by_max_output_tokens_is_incomplete(client: openai.OpenAI, model_uid: str) -> None:
    response = client.responses.create(model=model_uid, input="Tell me a long story.", max_output_tokens=4)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 4


def test_stream_matches_create(client: openai.OpenAI, model_uid: str) -> None:
    kwargs: dict[str, Any] = dict(
        model=model_uid,
        input=QUESTION,
        instructions="You are a helpful assistant.",
        max_output_tokens=64,
        temperature=0,
    )
    whole = client.responses.create(**kwargs)
    with client.responses.stream(**kwargs) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.status == "completed", "64 tokens should hold SmolLM2's answer"
    assert len(deltas) > 1 and "".join(deltas) == final.output_text == whole.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert client.responses.retrieve(final.id).output_text == final.output_text


def test_raw_stream_event_names(client: openai.OpenAI, model_uid: str) -> None:
    events = list(client.responses.create(model=model_uid, input="Hi", max_output_tokens=6, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_previous_response_id_continues_the_conversation(client: openai.OpenAI, model_uid: str) -> None:
    first = client.responses.create(
        model=model_uid, input="My name is Ada. Say hello.", max_output_tokens=8, temperature=0
    )
    follow = client.responses.create(
        model=model_uid, input="What is my name?", previous_response_id=first.id, max_output_tokens=1, temperature=0
    )
    alone = client.responses.create(model=model_uid, input="What is my name?", max_output_tokens=1, temperature=0)
    assert follow.previous_response_id == first.id
    # the earlier turns are in the prompt: both inputs and the first answer
    assert follow.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens + 5


def test_store_false_keeps_nothing(client: openai.OpenAI, model_uid: str) -> None:
    response = client.responses.create(model=model_uid, input="Hi", max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=model_uid, input="Again", previous_response_id=response.id)
    assert "previous_response_id" in str(caught.value.body)


def test_delete(client: openai.OpenAI, model_uid: str) -> None:
    response = client.responses.create(model=model_uid, input="Hi", max_output_tokens=4)
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_function_call_output_round_trip(client: openai.OpenAI, model_uid: str) -> None:
    """A function_call item and its output are rendered into the prompt and answered."""
    response = client.responses.create(
        model=model_uid,
        tools=[TOOL],
        max_output_tokens=8,
        temperature=0,
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 24 degrees"},
        ],
    )
    assert response.output and response.usage.input_tokens > 10


def test_forced_function_call_and_its_output(client: openai.OpenAI, model_uid: str) -> None:
    """tool_choice naming the function gives a function_call whose arguments fit the schema; its output, sent with
    previous_response_id, is answered."""
    first = client.responses.create(
        model=model_uid,
        input="What is the weather in Paris?",
        tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=64,
        temperature=0,
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls, first.output
    assert calls[0].name == "get_weather" and isinstance(json.loads(calls[0].arguments).get("city"), str)
    answer = client.responses.create(
        model=model_uid,
        previous_response_id=first.id,
        tools=[TOOL],
        max_output_tokens=8,
        temperature=0,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 24 degrees"}],
    )
    alone = client.responses.create(
        model=model_uid, input="What is the weather in Paris?", tools=[TOOL], max_output_tokens=1, store=False
    )
    assert answer.output and answer.usage.input_tokens > alone.usage.input_tokens + 5


def test_forced_function_call_streams_arguments(client: openai.OpenAI, model_uid: str) -> None:
    with client.responses.stream(
        model=model_uid,
        input="Weather in Rome?",
        tools=[TOOL],
        tool_choice="required",
        max_output_tokens=64,
        temperature=0,
    ) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert calls and "response.function_call_arguments.delta" in kinds
    assert isinstance(json.loads(calls[0].arguments).get("city"), str)


@pytest.mark.parametrize(
    "body,status,param",
    [
        ({"input": [{"role": "robot", "content": "x"}]}, 400, "input[0].role"),
        ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "x"}]}, 400, "input[0].call_id"),
        (
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}
                ]
            },
            400,
            "input[0].content[0]",
        ),
        (
            {
                "input": "hi",
                "tools": [{"type": "function", "name": "t", "parameters": {"type": "object", "properties": "x"}}],
            },
            400,
            "tools[0].parameters.properties",
        ),
        ({"input": "hi", "tools": [{"type": "code_interpreter"}]}, 400, "tools[0].type"),
        ({"input": "hi", "previous_response_id": "resp_missing"}, 404, "previous_response_id"),
        ({"input": "hi", "model": "no-such-model"}, 404, "model"),
        ({}, 400, "input"),
    ],
)
def test_malformed_requests_get_openai_errors(
    local_server, model_uid: str, body: dict[str, Any], status: int, param: str
) -> None:
    response = httpx.post(f"{local_server.api}/responses", json={"model": model_uid, **body}, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"]


def test_unknown_response_id_is_404(local_server) -> None:
    response = httpx.get(f"{local_server.api}/responses/resp_nothing")
    assert response.status_code == 404 and response.json()["error"]["code"] == "response_not_found"


def test_text_format_json_schema(client: openai.OpenAI, model_uid: str) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model=model_uid,
        input="Name a city in France.",
        max_output_tokens=48,
        temperature=0,
        text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}},
    )
    value = json.loads(response.output_text)
    assert set(value) == {"city", "country"} and all(isinstance(v, str) for v in value.values())
