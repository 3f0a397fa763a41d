"""The Transformers engine's tools, structured output, reasoning and sampling fields on the real converted SmolLM2.

Forced tool calls and JSON schemas are enforced by llguidance inside the continuous-batching loop, so the arguments
and objects validate against their schemas even on a 135M model.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")

from benchmark._weights import converted_smollm2  # noqa: E402
from xinference.engines.transformers.engine import TransformersEngine  # noqa: E402
from xinference.errors import InvalidRequest  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

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
            "description": "Local time of a city",
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
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make_engine(loop, family: ModelFamily):
    spec = next(s for s in family.model_specs if s.model_format == "pytorch")
    engine = TransformersEngine(
        model_uid="unit-tf-tools",
        family=family,
        spec=spec,
        quantization="none",
        model_path=str(converted_smollm2()),
        config=TransformersEngine.parse_config({"max_num_seqs": 4, "max_model_len": 1024}),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    return engine


@pytest.fixture(scope="module")
def engine(loop):
    engine = make_engine(loop, ModelRegistry().get("smollm2-instruct"))
    yield engine
    loop.run_until_complete(engine.unload())


def chat(loop, engine, **params):
    return loop.run_until_complete(engine.chat({"messages": ASK, "max_tokens": 60, "temperature": 0, **params}))


def collect(loop, engine, **params) -> list[dict]:
    async def run():
        stream = await engine.chat_stream({"messages": ASK, "max_tokens": 60, "temperature": 0, **params})
        out, done = [], False
        while not done:
            batch, done = await stream.next_batch()
            out.extend(batch)
        return out

    return loop.run_until_complete(run())


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_call_validates(loop, engine, choice) -> None:
    reply = chat(loop, engine, tools=TOOLS, tool_choice=choice)
    result = reply["choices"][0]
    assert result["finish_reason"] == "tool_calls" and not result["message"]["content"]
    [call] = result["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
    if isinstance(choice, dict):
        assert call["function"]["name"] == "get_weather"


def test_forced_tool_call_streamed(loop, engine) -> None:
    chunks = collect(loop, engine, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    pieces = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert pieces[0]["id"].startswith("call_") and pieces[0]["function"]["name"] == "get_time"
    assert {p["index"] for p in pieces} == {0}
    arguments = "".join(p["function"]["arguments"] for p in pieces)
    jsonschema.validate(json.loads(arguments), TOOLS[1]["function"]["parameters"])
    assert [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]] == ["tool_calls"]


def test_json_schema_and_json_object(loop, engine) -> None:
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string", "maxLength": 30}, "population_millions": {"type": "number"}},
        "required": ["capital", "population_millions"],
        "additionalProperties": False,
    }
    reply = chat(
        loop,
        engine,
        messages=[{"role": "user", "content": "Capital of France, as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}},
    )
    jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), schema)
    any_object = chat(loop, engine, response_format={"type": "json_object"})
    assert isinstance(json.loads(any_object["choices"][0]["message"]["content"]), dict)


def test_bad_structured_requests_are_400s(loop, engine) -> None:
    cases = [
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}},
            "response_format",
        ),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"logit_bias": {"999999": 5}}, "logit_bias"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"n": 50}, "n"),
    ]
    for params, field in cases:
        with pytest.raises(InvalidRequest) as info:
            chat(loop, engine, **params)
        assert info.value.param == field, (params, info.value)


def test_logprobs_match_greedy_choice(loop, engine) -> None:
    reply = chat(loop, engine, max_tokens=8, logprobs=True, top_logprobs=3)
    entries = reply["choices"][0]["logprobs"]["content"]
    assert len(entries) == reply["usage"]["completion_tokens"] == 8
    for entry in entries:
        assert len(entry["top_logprobs"]) == 3
        best = entry["top_logprobs"][0]
        assert best["token"] == entry["token"] and best["logprob"] == pytest.approx(entry["logprob"])
        assert entry["logprob"] <= 0
    assert "".join(e["token"] for e in entries) == reply["choices"][0]["message"]["content"]


def test_n_logit_bias_min_p(loop, engine) -> None:
    several = chat(loop, engine, n=3, temperature=1.0, seed=3, max_tokens=6)
    assert [c["index"] for c in several["choices"]] == [0, 1, 2]
    assert 3 <= several["usage"]["completion_tokens"] <= 18
    greedy = chat(loop, engine, max_tokens=1, logprobs=True)
    first = greedy["choices"][0]["logprobs"]["content"][0]["token"]
    banned_id = engine._tokenizer.convert_tokens_to_ids(engine._tokenizer.tokenize(first))[0]
    biased = chat(loop, engine, max_tokens=1, logit_bias={str(banned_id): -100})
    assert biased["choices"][0]["message"]["content"] != first
    assert (
        chat(loop, engine, temperature=0.8, min_p=0.2, top_k=5, seed=1, max_tokens=4, repeat_penalty=1.2)["usage"][
            "completion_tokens"
        ]
        > 0
    )
    streamed = collect(loop, engine, n=2, max_tokens=4, stream_options={"include_usage": True})
    assert {ch["index"] for c in streamed for ch in c["choices"]} == {0, 1}
    assert streamed[-1]["usage"]["completion_tokens"] == 8


def test_reasoning_end_to_end(loop) -> None:
    """A family declaring tags whose template opens the reasoning block (as DeepSeek-R1's does): what the model
    writes after the opened ``<think>`` is reasoning, streamed as ``reasoning_content``; with thinking off the
    template closes the block, the text is the answer and no tag or reasoning comes back."""
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
    engine = make_engine(loop, family)
    engine._tokenizer.chat_template = None  # the family's template, not the tokenizer's
    question = [{"role": "user", "content": "What is the capital of France?"}]
    try:
        on = loop.run_until_complete(engine.chat({"messages": question, "max_tokens": 20, "temperature": 0}))
        message = on["choices"][0]["message"]
        assert "Paris" in message["reasoning_content"] and not message["content"]
        off = loop.run_until_complete(
            engine.chat(
                {
                    "messages": question,
                    "max_tokens": 20,
                    "temperature": 0,
                    "chat_template_kwargs": {"enable_thinking": False},
                }
            )
        )
        message = off["choices"][0]["message"]
        assert (
            "Paris" in message["content"] and "reasoning_content" not in message and "think>" not in message["content"]
        )
        chunks = collect(loop, engine, messages=question, max_tokens=20)
        deltas = [ch["delta"] for c in chunks for ch in c["choices"]]
        assert sum(1 for d in deltas if d.get("reasoning_content")) > 1  # streamed as it comes, not at the end
        assert "Paris" in "".join(d.get("reasoning_content") or "" for d in deltas)
        assert not "".join(d.get("content") or "" for d in deltas)
    finally:
        loop.run_until_complete(engine.unload())


def test_forced_call_in_a_family_format(loop) -> None:
    """A family declaring Hermes calls: the grammar writes the call inside ``<tool_call>`` markers, the Hermes
    parser reads it back, whole and streamed."""
    base = ModelRegistry().get("smollm2-instruct").model_dump()
    family = ModelFamily.model_validate(
        {**base, "model_name": "smollm2-hermes", "tool_call_format": "hermes", "model_ability": ["chat", "tools"]}
    )
    engine = make_engine(loop, family)
    try:
        reply = chat(loop, engine, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        [call] = reply["choices"][0]["message"]["tool_calls"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER)
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert not reply["choices"][0]["message"]["content"]  # the markers never reach the content
        chunks = collect(loop, engine, tools=TOOLS, tool_choice="required")
        text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
        pieces = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
        assert "tool_call>" not in text and pieces and pieces[0]["function"]["name"] in {"get_weather", "get_time"}
    finally:
        loop.run_until_complete(engine.unload())


def test_tool_result_round_trip(loop, engine) -> None:
    """A forced call, then its result sent back: the model answers in text (SmolLM2's template renders neither
    tools nor calls; both are written into the prompt)."""
    first = chat(loop, engine, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    call = first["choices"][0]["message"]["tool_calls"][0]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "18 degrees and sunny"},
    ]
    reply = chat(loop, engine, messages=history, tools=TOOLS, max_tokens=30)
    assert reply["choices"][0]["message"]["content"] and reply["choices"][0]["finish_reason"] in ("stop", "length")
    prompt = engine._render({"messages": history, "tools": TOOLS})
    assert "18 degrees and sunny" in prompt and call["function"]["arguments"].strip("{}") in prompt


def test_constrained_and_free_sequences_share_the_batch(loop, engine) -> None:
    """A grammar applies to its own row only: plain requests decoded in the same batch give their solo output."""
    plain = [[{"role": "user", "content": p}] for p in ("Name three colors.", "What is 2+2?")]
    solo = [chat(loop, engine, messages=m, max_tokens=12)["choices"][0]["message"]["content"] for m in plain]

    async def together():
        forced = engine.chat(
            {"messages": ASK, "max_tokens": 60, "temperature": 0, "tools": TOOLS, "tool_choice": "required"}
        )
        schema = {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        }
        shaped = engine.chat(
            {
                "messages": ASK,
                "max_tokens": 30,
                "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
            }
        )
        free = [engine.chat({"messages": m, "max_tokens": 12, "temperature": 0}) for m in plain]
        return await asyncio.gather(forced, shaped, *free)

    forced, shaped, *free = loop.run_until_complete(together())
    assert [r["choices"][0]["message"]["content"] for r in free] == solo
    assert forced["choices"][0]["finish_reason"] == "tool_calls"
    assert isinstance(json.loads(shaped["choices"][0]["message"]["content"])["ok"], bool)
    assert engine.stats()["max_batch_seen"] >= 3


def test_logprobs_streamed_and_on_completions(loop, engine) -> None:
    chunks = collect(loop, engine, max_tokens=6, logprobs=True, top_logprobs=2)
    entries = [e for c in chunks for ch in c["choices"] for e in (ch.get("logprobs") or {}).get("content") or []]
    text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    assert len(entries) == 6 and "".join(e["token"] for e in entries) == text
    assert all(e["top_logprobs"][0]["token"] == e["token"] for e in entries)
    legacy = loop.run_until_complete(
        engine.completions({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0, "logprobs": 2})
    )
    logprobs = legacy["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == 4
    assert "".join(logprobs["tokens"]) == legacy["choices"][0]["text"]
    assert all(
        max(top, key=top.get) == token for token, top in zip(logprobs["tokens"], logprobs["top_logprobs"], strict=True)
    )


def test_auto_reads_the_described_call_shape(loop, engine) -> None:
    """SmolLM2's template knows no tools: they are described with a bare-JSON call shape, and ``auto`` reads that
    shape back as a call (plain text stays content)."""
    parser = engine._output_parser({"tools": TOOLS, "messages": ASK}, None, None)
    reply = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "get_time", "arguments": {"city": "Oslo"}}'},
                "finish_reason": "stop",
            }
        ]
    }
    message = parser.fix_response(reply)["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_time"
    text = chat(loop, engine, tools=TOOLS, max_tokens=40)
    message = text["choices"][0]["message"]
    assert message.get("tool_calls") or message["content"]  # either way a well-formed answer
