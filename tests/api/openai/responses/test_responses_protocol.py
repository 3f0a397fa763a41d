"""The Responses translation and its store without a server: requests (after a stored conversation) into chat
parameters, chat results and chunks into response objects and stream events. The stream is replayed through the
openai SDK's own stream state, which raises on an event sequence it does not accept."""

from __future__ import annotations

from typing import Any

import pytest
from openai._models import construct_type_unchecked
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from xinference.api.openai.responses.protocol import ResponsesRequest
from xinference.api.openai.responses.serving import ResponsesService, input_items
from xinference.api.openai.responses.store import ResponseStore
from xinference.api.openai.responses.stream import ResponseShape, ResponseStream, output_items
from xinference.errors import EngineError, InvalidRequest, UnsupportedOption

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _request(**fields: Any) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"model": "m", "input": "Hi", **fields})


def test_text_input_with_instructions() -> None:
    chat = _request(instructions="Be brief.", max_output_tokens=20, temperature=0.2).to_chat([])
    assert chat.params["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert chat.params["max_tokens"] == 20 and chat.params["temperature"] == 0.2
    assert chat.added == [{"role": "user", "content": "Hi"}]


def test_items_become_chat_messages() -> None:
    chat = _request(
        tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        input=[
            {"role": "developer", "content": "Use tools."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "Call the tool."}],
            },
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
        ],
    ).to_chat([])
    system, user, assistant, tool = chat.params["messages"]
    assert system == {"role": "system", "content": "Use tools."}
    assert user == {"role": "user", "content": "Weather in Paris?"}
    assert assistant["reasoning_content"] == "Call the tool."
    assert assistant["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    ]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}
    assert chat.params["tools"][0]["function"]["parameters"] == TOOL["parameters"]
    assert chat.params["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_history_comes_first_and_outputs_may_answer_its_calls() -> None:
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
    ]
    chat = _request(
        instructions="New rules.", input=[{"type": "function_call_output", "call_id": "call_9", "output": "Rain"}]
    ).to_chat(history)
    assert chat.params["messages"][0] == {"role": "system", "content": "New rules."}
    assert chat.params["messages"][1:3] == history
    assert chat.added == [{"role": "tool", "tool_call_id": "call_9", "content": "Rain"}]


def test_text_format_and_reasoning() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    params = (
        _request(
            text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}},
            reasoning={"effort": "none"},
        )
        .to_chat([])
        .params
    )
    assert params["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert params["chat_template_kwargs"] == {"enable_thinking": False}
    assert _request(text={"format": {"type": "json_object"}}).to_chat([]).params["response_format"] == {
        "type": "json_object"
    }


MALFORMED: list[tuple[dict[str, Any], str]] = [
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}, "input[0].call_id"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]}, "input[0].arguments"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
    ({"input": [{"role": "user", "content": [{"type": "input_text"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0]"),
    ({"input": [{"type": "web_search_call"}]}, "input[0].type"),
    ({"input": [{"content": "no role or type"}]}, "input[0]"),
    ({"input": ["just a string"]}, "input[0]"),
    ({"input": []}, "input"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tools": [{**TOOL, "name": "bad name"}]}, "tools[0].name"),
    ({"tools": [{**TOOL, "parameters": {"type": "array"}}]}, "tools[0].parameters"),
    ({"tools": [{**TOOL, "parameters": {"type": "object", "properties": []}}]}, "tools[0].parameters.properties"),
    ({"tools": [TOOL, TOOL]}, "tools[1].name"),
    ({"tools": [TOOL], "tool_choice": {"type": "function", "name": "other"}}, "tool_choice.name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"background": True}, "background"),
    ({"truncation": "auto"}, "truncation"),
    ({"conversation": "conv_1"}, "conversation"),
]


@pytest.mark.parametrize("fields,param", MALFORMED)
def test_malformed_requests_name_the_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        _request(**fields).to_chat([])
    assert caught.value.param == param, caught.value.message
    assert caught.value.status_code == 400


def test_hosted_tools_are_unsupported() -> None:
    with pytest.raises(UnsupportedOption):
        _request(tools=[{"type": "file_search"}]).to_chat([])


# -- output ---------------------------------------------------------------------------------------------------------
def test_output_items_and_finished_response() -> None:
    message = {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "Hmm.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    items = output_items(message)
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    assert items[2]["call_id"] == "call_1" and items[2]["arguments"] == '{"city":"Paris"}'
    shape = ResponseShape("m", {"instructions": "x", "store": False, "max_output_tokens": 5})
    done = shape.finished(items, {"prompt_tokens": 4, "completion_tokens": 5}, "length")
    assert done["status"] == "incomplete" and done["incomplete_details"] == {"reason": "max_output_tokens"}
    assert done["usage"]["total_tokens"] == 9 and done["store"] is False and done["instructions"] == "x"
    assert shape.finished(items, None, "tool_calls")["status"] == "completed"


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    }
    if usage:
        chunk["usage"] = usage
    return chunk


def _replay(chunks: list[dict[str, Any]]) -> tuple[ResponseStream, list[tuple[str, dict[str, Any]]], Any]:
    stream = ResponseStream(ResponseShape("m", {}))
    events = stream.start()
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.finish()
    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    snapshot = None
    for number, (name, payload) in enumerate(events):
        assert payload["type"] == name and payload["sequence_number"] == number
        event = construct_type_unchecked(type_=ResponseStreamEvent, value=payload)  # type: ignore[arg-type]
        state.handle_event(event)
        snapshot = state._ResponseStreamState__current_snapshot
    return stream, events, snapshot


def test_stream_events_accumulate_in_the_sdk() -> None:
    stream, events, snapshot = _replay(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"reasoning_content": "Think"}),
            _chunk({"reasoning_content": "ing."}),
            _chunk({"content": "Let me "}),
            _chunk({"content": "check."}),
            _chunk(
                {"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "get_weather", "arguments": ""}}]}
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            _chunk({}, "tool_calls"),
            _chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 8}),
        ]
    )
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    assert names.count("response.output_item.added") == names.count("response.output_item.done") == 3
    assert "response.reasoning_text.delta" in names and "response.function_call_arguments.done" in names
    final = events[-1][1]["response"]
    assert [i["type"] for i in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][1]["content"][0]["text"] == "Let me check."
    assert final["output"][2]["arguments"] == '{"city":"Paris"}' and final["output"][2]["call_id"] == "call_a"
    assert final["usage"]["input_tokens"] == 9 and final["usage"]["output_tokens"] == 8
    assert snapshot.output[1].content[0].text == "Let me check."
    assert snapshot.output[2].arguments == '{"city":"Paris"}'
    # what the store keeps for the next turn
    assert stream.message["content"] == "Let me check." and stream.message["reasoning_content"] == "Thinking."
    assert stream.message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}


def test_stream_cut_by_max_output_tokens_is_incomplete() -> None:
    _, events, _ = _replay([_chunk({"content": "Once upon"}), _chunk({}, "length")])
    assert events[-1][0] == "response.incomplete"
    assert events[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_failed_stream_ends_with_error_and_failed() -> None:
    stream = ResponseStream(ResponseShape("m", {}))
    stream.start()
    stream.feed(_chunk({"content": "Hel"}))
    events = stream.fail(EngineError("boom"))
    assert [n for n, _ in events] == ["error", "response.failed"]
    assert events[0][1]["message"] == "boom" and events[1][1]["response"]["status"] == "failed"


# -- store ----------------------------------------------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_store_expires_and_evicts_oldest() -> None:
    clock = _Clock()
    store = ResponseStore(max_items=2, ttl=10, clock=clock)
    store.put({"id": "a"}, [{"role": "user", "content": "1"}])
    clock.now += 5
    store.put({"id": "b"}, [])
    clock.now += 3
    store.put({"id": "c"}, [])
    assert store.get("a") is None and store.get("b") is not None and len(store) == 2  # evicted: over max_items
    clock.now += 8
    assert store.get("b") is None and store.get("c") is not None  # b stored 11 s ago, c 8 s ago
    assert store.delete("c") and not store.delete("c") and len(store) == 0


def test_store_bounded_by_size() -> None:
    store = ResponseStore(max_items=100, max_bytes=400)
    for n in range(10):
        store.put({"id": f"r{n}"}, [{"role": "user", "content": "x" * 60}])
    assert 0 < len(store) < 10 and store.get("r9") is not None and store.get("r0") is None
    store.put({"id": "huge"}, [{"role": "user", "content": "x" * 1000}])
    assert store.get("huge") is None and store.get("r9") is not None


def test_input_items_are_kept_with_ids_and_paged() -> None:
    items = input_items(
        [
            {"role": "user", "content": "Hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok", "id": "mine"},
        ]
    )
    assert items[0]["type"] == "message" and items[0]["content"] == [{"type": "input_text", "text": "Hi"}]
    assert items[1]["id"].startswith("fc_") and items[2]["id"] == "mine"
    assert input_items("Hello")[0]["content"][0] == {"type": "input_text", "text": "Hello"}
    store = ResponseStore()
    store.put({"id": "resp_1"}, [], items)
    service = ResponsesService(generation=None, store=store)  # type: ignore[arg-type]
    newest_first = service.input_items("resp_1", limit=2)
    assert [i["id"] for i in newest_first["data"]] == ["mine", items[1]["id"]] and newest_first["has_more"]
    rest = service.input_items("resp_1", after=newest_first["last_id"])
    assert [i["id"] for i in rest["data"]] == [items[0]["id"]] and not rest["has_more"]
    assert service.input_items("resp_1", order="asc")["first_id"] == items[0]["id"]
