"""The Anthropic Messages API through the real server, driven by the ``anthropic`` SDK (SmolLM2 on llama.cpp)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
GREEDY = {"temperature": 0}  # this SDK version takes sampling options through extra_body


@pytest.fixture(scope="module")
def client(local_server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=local_server.endpoint, api_key="not-needed", max_retries=0, timeout=120)


def test_create(client: anthropic.Anthropic, model_uid: str) -> None:
    message = client.messages.create(
        model=model_uid,
        max_tokens=24,
        system="You are a helpful assistant.",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body=GREEDY,
    )
    assert message.type == "message" and message.role == "assistant" and message.model == model_uid
    assert message.content[0].type == "text" and "Paris" in message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 5 and 0 < message.usage.output_tokens <= 24


def test_max_tokens_is_reported(client: anthropic.Anthropic, model_uid: str) -> None:
    message = client.messages.create(
        model=model_uid, max_tokens=3, messages=[{"role": "user", "content": "Tell me a long story."}]
    )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_stream_matches_create(client: anthropic.Anthropic, model_uid: str) -> None:
    kwargs: dict[str, Any] = dict(
        model=model_uid,
        max_tokens=24,
        system="You are a helpful assistant.",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body=GREEDY,
    )
    whole = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_raw_stream_event_order(client: anthropic.Anthropic, model_uid: str) -> None:
    events = list(
        client.messages.create(model=model_uid, max_tokens=8, stream=True, messages=[{"role": "user", "content": "Hi"}])
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
    assert events[-2].usage.output_tokens == 8 and events[-2].delta.stop_reason == "max_tokens"


def test_count_tokens_matches_what_generation_reports(client: anthropic.Anthropic, model_uid: str) -> None:
    kwargs: dict[str, Any] = dict(
        model=model_uid, system="You are a helpful assistant.", messages=[{"role": "user", "content": QUESTION}]
    )
    counted = client.messages.count_tokens(**kwargs).input_tokens
    used = client.messages.create(max_tokens=1, **kwargs).usage.input_tokens
    assert counted == used > 5
    longer = client.messages.count_tokens(
        model=model_uid, messages=[{"role": "user", "content": QUESTION + " Answer in one word, please."}]
    ).input_tokens
    assert (
        longer
        > client.messages.count_tokens(model=model_uid, messages=[{"role": "user", "content": QUESTION}]).input_tokens
    )


def test_tool_result_round_trip(client: anthropic.Anthropic, model_uid: str) -> None:
    """A conversation that carries a tool_use and its tool_result is rendered and answered."""
    message = client.messages.create(
        model=model_uid,
        max_tokens=8,
        tools=[WEATHER],
        extra_body=GREEDY,
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "Sunny, 24 degrees"}],
            },
        ],
    )
    assert message.content and message.content[0].type in ("text", "tool_use")


def test_forced_tool_use_round_trip(client: anthropic.Anthropic, model_uid: str) -> None:
    """tool_choice naming a tool gives a tool_use whose input fits the schema; its tool_result is then answered."""
    question = {"role": "user", "content": "What is the weather in Paris?"}
    first = client.messages.create(
        model=model_uid,
        max_tokens=64,
        tools=[WEATHER],
        messages=[question],
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body=GREEDY,
    )
    calls = [block for block in first.content if block.type == "tool_use"]
    assert first.stop_reason == "tool_use" and calls, first.content
    assert calls[0].name == "get_weather" and isinstance(calls[0].input.get("city"), str)
    forced_count = client.messages.count_tokens(
        model=model_uid, tools=[WEATHER], messages=[question], tool_choice={"type": "tool", "name": "get_weather"}
    )
    assert forced_count.input_tokens == first.usage.input_tokens  # counted as the forced prompt is built
    conversation = [
        question,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "Sunny, 24 C"}]},
    ]
    answer = client.messages.create(
        model=model_uid, max_tokens=8, tools=[WEATHER], extra_body=GREEDY, messages=conversation
    )
    counted = client.messages.count_tokens(model=model_uid, tools=[WEATHER], messages=conversation).input_tokens
    alone = client.messages.count_tokens(model=model_uid, tools=[WEATHER], messages=[question]).input_tokens
    assert answer.content and answer.usage.input_tokens == counted > alone + 5


def test_forced_tool_use_streams_input_json(client: anthropic.Anthropic, model_uid: str) -> None:
    with client.messages.stream(
        model=model_uid,
        max_tokens=64,
        tools=[WEATHER],
        extra_body=GREEDY,
        tool_choice={"type": "any"},
        messages=[{"role": "user", "content": "Weather in Rome?"}],
    ) as stream:
        final = stream.get_final_message()
    calls = [block for block in final.content if block.type == "tool_use"]
    assert final.stop_reason == "tool_use" and calls and isinstance(calls[0].input.get("city"), str)


@pytest.mark.parametrize("path", ["/v1/messages", "/anthropic/v1/messages"])
@pytest.mark.parametrize(
    "body,status,needle",
    [
        ({"messages": [{"role": "system", "content": "x"}]}, 400, "top-level 'system'"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]}
                ]
            },
            400,
            "no matching tool_use",
        ),
        ({"messages": [{"role": "user", "content": [{"type": "audio", "data": "x"}]}]}, 400, "audio"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                            }
                        ],
                    }
                ]
            },
            400,
            "cannot read images",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "t", "input_schema": {"type": "string"}}],
            },
            400,
            "type 'object'",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [WEATHER],
                "tool_choice": {"type": "tool", "name": "nope"},
            },
            400,
            "not in 'tools'",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": [{"role": "user", "content": "hi"}], "model": "no-such-model"}, 404, "no-such-model"),
    ],
)
def test_malformed_requests_get_anthropic_errors(
    local_server, model_uid: str, path: str, body: dict[str, Any], status: int, needle: str
) -> None:
    payload = {"model": model_uid, "max_tokens": 8, **body}
    response = httpx.post(local_server.endpoint + path, json=payload, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()
    assert error["type"] == "error" and needle in error["error"]["message"]
    assert error["error"]["type"] == ("not_found_error" if status == 404 else "invalid_request_error")


def test_sdk_raises_typed_errors(client: anthropic.Anthropic, model_uid: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=model_uid,
            max_tokens=8,
            messages=[
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]}
            ],
        )
    assert "tool_result" in caught.value.message
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="no-such-model", messages=[{"role": "user", "content": "hi"}])


def test_invalid_json_body_is_an_anthropic_400(local_server) -> None:
    response = httpx.post(
        f"{local_server.endpoint}/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["type"] == "error"


def test_output_config_json_schema(client: anthropic.Anthropic, model_uid: str) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    message = client.messages.create(
        model=model_uid,
        max_tokens=32,
        messages=[{"role": "user", "content": QUESTION}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
        extra_body=GREEDY,
    )
    value = json.loads(message.content[0].text)
    assert list(value) == ["answer"] and isinstance(value["answer"], str)
