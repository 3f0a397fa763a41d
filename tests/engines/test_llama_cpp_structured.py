"""llama.cpp on the bundled SmolLM2 GGUF: forced tool calls guaranteed through llama.cpp's grammar (the bundled
template alone returns plain text), json_schema output, streamed call deltas, and n refused with a 400."""

from __future__ import annotations

import asyncio
import json

import pytest

from xinference.engines.base import chunk_dicts
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.hardware import detect_hardware
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.slow

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather of a city", "parameters": WEATHER},
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 40}},
                "required": ["city"],
            },
        },
    },
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def engine():
    family = ModelRegistry().get("smollm2-instruct")
    spec = family.model_specs[0]
    engine = LlamaCppEngine(
        model_uid="unit-llama-tools",
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=resolve_model_path(spec, "Q4_1"),
        config=LlamaCppEngine.parse_config({"n_ctx": 2048}),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    yield engine
    asyncio.run(engine.unload())


def chat(engine, **params):
    return asyncio.run(engine.chat({"messages": ASK, "max_tokens": 80, "temperature": 0, **params}))


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_forced_tool_call_validates(engine, choice) -> None:
    result = chat(engine, tools=TOOLS, tool_choice=choice)["choices"][0]
    assert result["finish_reason"] == "tool_calls" and not result["message"]["content"]
    [call] = result["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
    if isinstance(choice, dict):
        assert call["function"]["name"] == "get_time"


def test_forced_tool_call_streamed(engine) -> None:
    async def run():
        stream = await engine.chat_stream(
            {
                "messages": ASK,
                "max_tokens": 80,
                "temperature": 0,
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            }
        )
        out, done = [], False
        while not done:
            batch, done = await stream.next_batch()
            out.extend(chunk_dicts(batch))
        return out

    chunks = asyncio.run(run())
    pieces = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert pieces[0]["function"]["name"] == "get_weather" and {p["index"] for p in pieces} == {0}
    jsonschema.validate(json.loads("".join(p["function"]["arguments"] for p in pieces)), WEATHER)
    assert [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]] == ["tool_calls"]
    assert not "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])


def test_json_schema_validates(engine) -> None:
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string", "maxLength": 30}, "population_millions": {"type": "number"}},
        "required": ["capital", "population_millions"],
        "additionalProperties": False,
    }
    reply = chat(
        engine,
        messages=[{"role": "user", "content": "Capital of France, as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}},
    )
    jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), schema)


def test_refusals_name_the_field(engine) -> None:
    for params, error, field in [
        ({"n": 2}, UnsupportedOption, "n"),
        ({"tool_choice": "required"}, InvalidRequest, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            InvalidRequest,
            "tool_choice",
        ),
    ]:
        with pytest.raises(error) as info:
            chat(engine, **params)
        assert info.value.param == field


def test_openai_sdk_reads_forced_calls_and_json(local_server) -> None:
    """Through the HTTP API with the official SDK (the README's example): a forced call, whole and streamed, and a
    json_schema reply, from the default model of the shared server."""
    from openai import OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 40}},
                    "required": ["city"],
                },
            },
        }
    ]
    reply = client.chat.completions.create(
        model="smollm2-instruct", messages=ASK, tools=tools, tool_choice="required", temperature=0, max_tokens=60
    )
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), tools[0]["function"]["parameters"])
    stream = client.chat.completions.create(
        model="smollm2-instruct",
        messages=ASK,
        tools=tools,
        tool_choice="required",
        temperature=0,
        max_tokens=60,
        stream=True,
    )
    arguments, names, finish = "", [], None
    for chunk in stream:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                names += [piece.function.name] if piece.function.name else []
                arguments += piece.function.arguments or ""
            finish = choice.finish_reason or finish
    assert names == ["get_weather"] and finish == "tool_calls"
    assert json.loads(arguments) == json.loads(call.function.arguments)  # greedy: the same call either way
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}
    structured = client.chat.completions.create(
        model="smollm2-instruct",
        messages=ASK,
        temperature=0,
        max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    )
    jsonschema.validate(json.loads(structured.choices[0].message.content), schema)


def test_reasoning_end_to_end_on_llama_cpp() -> None:
    """A family declaring tags whose template opens the block: llama.cpp's text is reasoning from its first token;
    with thinking off the template closes the block and the answer is content, with no tag."""
    base = ModelRegistry().get("smollm2-instruct").model_dump()
    template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
        "{% else %}<think>\n{% endif %}{% endif %}"
    )
    family = ModelFamily.model_validate(
        {
            **base,
            "model_name": "smollm2-thinking",
            "chat_template": template,
            "model_ability": ["chat", "reasoning"],
            "reasoning_start_tag": "<think>",
            "reasoning_end_tag": "</think>",
        }
    )
    spec = family.model_specs[0]
    engine = LlamaCppEngine(
        model_uid="unit-llama-think",
        family=family,
        spec=spec,
        quantization="Q4_1",
        model_path=resolve_model_path(spec, "Q4_1"),
        config=LlamaCppEngine.parse_config({"n_ctx": 1024, "n_parallel": 1}),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    question = [{"role": "user", "content": "What is the capital of France?"}]
    try:
        on = asyncio.run(engine.chat({"messages": question, "max_tokens": 20, "temperature": 0}))["choices"][0]
        assert "Paris" in on["message"]["reasoning_content"] and not on["message"]["content"]

        async def streamed():
            stream = await engine.chat_stream({"messages": question, "max_tokens": 20, "temperature": 0})
            out, done = [], False
            while not done:
                batch, done = await stream.next_batch()
                out.extend(chunk_dicts(batch))
            return [ch["delta"] for c in out for ch in c["choices"]]

        deltas = asyncio.run(streamed())
        assert sum(1 for d in deltas if d.get("reasoning_content")) > 1
        assert "Paris" in "".join(d.get("reasoning_content") or "" for d in deltas)
        off = asyncio.run(
            engine.chat({"messages": question, "max_tokens": 20, "temperature": 0, "enable_thinking": False})
        )["choices"][0]["message"]
        assert "Paris" in off["content"] and "think>" not in off["content"] and not off.get("reasoning_content")
    finally:
        asyncio.run(engine.unload())
