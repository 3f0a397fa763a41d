"""The MLX engine in-process on real weights: SmolLM2-135M-Instruct converted from the bundled GGUF to safetensors
(transformers 5 writes ``rope_parameters``, so the rope fix is exercised), loaded by mlx-lm on this CPU.

Needs mlx-lm importable, i.e. the MLX env's Python (``test_mlx.py::test_in_process_suite_in_the_env`` runs this
file with it); skipped elsewhere. Covers greedy chat, stop strings and tokens, seeds, batched vs solo decoding,
the single-sequence mode, cancel, streaming with usage, and what the engine refuses.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from pathlib import Path

import pytest

if importlib.util.find_spec("mlx_lm") is None:  # not imported here: mlx must load after OpenBLAS
    pytest.skip("mlx-lm is not importable here (run with the MLX env's Python)", allow_module_level=True)

from benchmark._weights import converted_smollm2  # noqa: E402
from xinference.engines.mlx.engine import MLXEngine  # noqa: E402
from xinference.engines.mlx.runtime import config_overrides  # noqa: E402
from xinference.errors import ContextLengthExceeded, InvalidRequest, UnsupportedOption  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def weights() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return converted_smollm2()


@pytest.fixture(scope="module")
def loop():  # type: ignore[no-untyped-def]
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _make(loop, weights: Path, uid: str, **options):  # type: ignore[no-untyped-def]
    family = ModelRegistry().get("smollm2-instruct")
    engine = MLXEngine(
        model_uid=uid,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(weights),
        config=MLXEngine.parse_config(options),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    return engine


@pytest.fixture(scope="module")
def engine(loop, weights):  # type: ignore[no-untyped-def]
    engine = _make(loop, weights, "unit-mlx", max_num_seqs=3, max_model_len=512)
    yield engine
    loop.run_until_complete(engine.unload())


def chat(loop, engine, messages, **params):  # type: ignore[no-untyped-def]
    return loop.run_until_complete(engine.chat({"messages": messages, **params}))


def content(reply) -> str:  # type: ignore[no-untyped-def]
    return str(reply["choices"][0]["message"]["content"])


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_the_converted_weights_need_the_rope_fix(weights: Path) -> None:
    assert config_overrides(weights) == {"rope_theta": 100000.0}


def test_greedy_chat_knows_paris(loop, engine) -> None:  # type: ignore[no-untyped-def]
    reply = chat(loop, engine, QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in content(reply) and reply["model"] == "unit-mlx"
    assert reply["choices"][0]["finish_reason"] == "stop"  # <|im_end|> ended it, and is not in the text
    assert "<|im_end|>" not in content(reply)
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 10 and 0 < usage["completion_tokens"] < 16
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    stats = engine.stats()
    assert stats["mode"] == "batch" and stats["blas"] != "mlx"


def test_max_tokens_stop_strings_seed_and_penalties(loop, engine) -> None:  # type: ignore[no-untyped-def]
    short = chat(loop, engine, QUESTION, temperature=0, max_tokens=3)
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 3
    stopped = chat(loop, engine, QUESTION, temperature=0, max_tokens=16, stop=[" Paris"])
    assert "Paris" not in content(stopped) and content(stopped).startswith("The capital")
    assert stopped["choices"][0]["finish_reason"] == "stop"
    sampled = [
        content(
            chat(
                loop,
                engine,
                user("Write a word."),
                temperature=1.5,
                top_p=0.95,
                top_k=50,
                min_p=0.01,
                seed=seed,
                max_tokens=12,
            )
        )
        for seed in (7, 7, 8)
    ]
    assert sampled[0] == sampled[1]
    banned = chat(loop, engine, QUESTION, temperature=0, max_tokens=16, logit_bias={"7042": -100})  # " Paris"
    assert "Paris" not in content(banned)
    penalised = chat(
        loop,
        engine,
        user("Repeat: la la la la"),
        temperature=0,
        max_tokens=8,
        presence_penalty=1.5,
        frequency_penalty=1.0,
        repeat_penalty=1.3,
    )
    assert penalised["usage"]["completion_tokens"] > 0


def test_completions(loop, engine) -> None:  # type: ignore[no-untyped-def]
    reply = loop.run_until_complete(
        engine.completions({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
    )
    assert reply["object"] == "text_completion" and "Paris" in reply["choices"][0]["text"]


def test_batched_greedy_matches_solo_and_respects_max_num_seqs(loop, engine) -> None:  # type: ignore[no-untyped-def]
    prompts = ["Hi there", "Name three colors.", "What is 2+2?", "Say hello in French.", "Count to three."]
    solo = [content(chat(loop, engine, user(p), temperature=0, max_tokens=10)) for p in prompts[:2]]
    seeded_solo = content(chat(loop, engine, user("Write a word."), temperature=1.0, seed=11, max_tokens=8))

    async def together():  # type: ignore[no-untyped-def]
        requests = [engine.chat({"messages": user(p), "temperature": 0, "max_tokens": 10}) for p in prompts]
        requests.append(
            engine.chat({"messages": user("Write a word."), "temperature": 1.0, "seed": 11, "max_tokens": 8})
        )
        return await asyncio.gather(*requests)

    replies = loop.run_until_complete(together())
    assert [content(r) for r in replies[:2]] == solo
    assert content(replies[-1]) == seeded_solo  # a seed gives the same text alone or in a batch
    stats = engine.stats()
    assert stats["max_batch_seen"] == 3 == stats["max_num_seqs"]


def test_cancel_frees_the_row_at_the_next_token(loop, engine) -> None:  # type: ignore[no-untyped-def]
    async def scenario():  # type: ignore[no-untyped-def]
        before = engine.stats()
        long = await engine.chat_stream(
            {"messages": user("Tell me a very long story."), "max_tokens": 400, "ignore_eos": True, "temperature": 0}
        )
        first, _ = await long.next_batch()
        short = await engine.chat({"messages": user("Hi"), "max_tokens": 3, "temperature": 0})
        assert not long.finished  # the short one joined the running batch and left before the long one
        long.cancel()
        for _ in range(250):
            stats = engine.stats()
            if stats["running"] == 0 and stats["aborted"] > before["aborted"]:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        return before, first, short, stats, engine.stats()

    before, first, short, stats, later = loop.run_until_complete(scenario())
    assert first[0]["choices"][0]["delta"]["role"] == "assistant"
    assert short["usage"]["completion_tokens"] == 3
    assert stats["running"] == 0 and stats["aborted"] == before["aborted"] + 1
    assert later["generated_tokens"] == stats["generated_tokens"]  # nothing decodes for the abandoned request
    assert stats["generated_tokens"] - before["generated_tokens"] < 200


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_cancelled_non_streamed_request_leaves_the_batch(loop, engine, kind) -> None:  # type: ignore[no-untyped-def]
    """What the API does when a non-streamed client goes away: the call is cancelled, the row frees at once."""
    long = {"max_tokens": 800, "ignore_eos": True, "temperature": 0}
    if kind == "chat":
        long["messages"] = user("Tell me a very long story.")
    else:
        long["prompt"] = "Once upon a time"

    async def scenario():  # type: ignore[no-untyped-def]
        before = engine.stats()
        task = asyncio.ensure_future(getattr(engine, kind)(long))
        while engine.stats()["generated_tokens"] - before["generated_tokens"] < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        at_cancel = engine.stats()["generated_tokens"]
        while engine.stats()["running"] and engine.stats()["generated_tokens"] - at_cancel < 150:
            await asyncio.sleep(0.01)
        left = engine.stats()
        short = await engine.chat({"messages": user("Hi"), "max_tokens": 3, "temperature": 0})
        return before, left, short, engine.stats()

    before, left, short, after = loop.run_until_complete(asyncio.wait_for(scenario(), 300))
    assert left["running"] == 0 and left["aborted"] == before["aborted"] + 1
    assert left["generated_tokens"] - before["generated_tokens"] < 100  # far from its 800 tokens
    assert after["generated_tokens"] - left["generated_tokens"] == short["usage"]["completion_tokens"] == 3
    assert after["aborted"] == left["aborted"]


def test_streamed_text_is_the_whole_decode(loop, engine) -> None:  # type: ignore[no-untyped-def]
    """Incremental detokenization: emoji and CJK arrive whole, and the pieces add up to the one-shot decode."""
    request = {"messages": user("Reply with emoji and Chinese: 👋🏽 你好世界 🎉"), "max_tokens": 40, "temperature": 0}

    async def scenario():  # type: ignore[no-untyped-def]
        stream = await engine.chat_stream(request)
        pieces, done = [], False
        while not done:
            batch, done = await stream.next_batch()
            pieces.extend(c["choices"][0]["delta"].get("content") or "" for c in batch if c["choices"])
        return pieces

    pieces = loop.run_until_complete(scenario())
    whole = content(
        chat(loop, engine, user("Reply with emoji and Chinese: 👋🏽 你好世界 🎉"), max_tokens=40, temperature=0)
    )
    assert "".join(pieces) == whole and not any("\ufffd" in piece for piece in pieces)


def test_stream_chunks_and_usage(loop, engine) -> None:  # type: ignore[no-untyped-def]
    async def scenario():  # type: ignore[no-untyped-def]
        stream = await engine.chat_stream(
            {"messages": QUESTION, "max_tokens": 16, "temperature": 0, "stream_options": {"include_usage": True}}
        )
        chunks, done = [], False
        while not done:
            batch, done = await stream.next_batch()
            chunks.extend(batch)
        return chunks

    chunks = loop.run_until_complete(scenario())
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert "Paris" in text and all(c["object"] == "chat.completion.chunk" for c in chunks)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishes == ["stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_request_errors(loop, engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ContextLengthExceeded, match="512"):
        chat(loop, engine, user("word " * 600), max_tokens=4)
    with pytest.raises(UnsupportedOption) as caught:
        chat(loop, engine, user("hi"), n=20)
    assert caught.value.param == "n"
    bad_schema = {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}
    with pytest.raises(InvalidRequest) as refused:
        chat(loop, engine, user("hi"), response_format=bad_schema)
    assert refused.value.param == "response_format"


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


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_forced_tool_call_validates(loop, engine, choice) -> None:  # type: ignore[no-untyped-def]
    jsonschema = pytest.importorskip("jsonschema")
    reply = chat(
        loop,
        engine,
        user("What is the weather in Paris?"),
        tools=TOOLS,
        tool_choice=choice,
        temperature=0,
        max_tokens=60,
    )
    result = reply["choices"][0]
    assert result["finish_reason"] == "tool_calls" and not result["message"]["content"]
    [call] = result["message"]["tool_calls"]
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
    if isinstance(choice, dict):
        assert call["function"]["name"] == "get_time"


def test_json_schema_streamed_and_json_object(loop, engine) -> None:  # type: ignore[no-untyped-def]
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string", "maxLength": 30}, "population_millions": {"type": "number"}},
        "required": ["capital", "population_millions"],
        "additionalProperties": False,
    }

    async def streamed():  # type: ignore[no-untyped-def]
        stream = await engine.chat_stream(
            {
                "messages": user("Capital of France, as JSON."),
                "temperature": 0,
                "max_tokens": 60,
                "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
            }
        )
        out, done = [], False
        while not done:
            batch, done = await stream.next_batch()
            out.extend(batch)
        return out

    chunks = loop.run_until_complete(streamed())
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    jsonschema.validate(json.loads(text), schema)
    any_object = chat(loop, engine, QUESTION, temperature=0, max_tokens=60, response_format={"type": "json_object"})
    assert isinstance(json.loads(content(any_object)), dict)


def test_logprobs_and_several_choices(loop, engine) -> None:  # type: ignore[no-untyped-def]
    reply = chat(loop, engine, QUESTION, temperature=0, max_tokens=4, logprobs=True, top_logprobs=3)
    entries = reply["choices"][0]["logprobs"]["content"]
    assert len(entries) == reply["usage"]["completion_tokens"] == 4
    for entry in entries:
        assert len(entry["top_logprobs"]) == 3 and entry["logprob"] <= 0
        assert entry["top_logprobs"][0]["token"] == entry["token"]  # greedy takes the best one
        assert entry["top_logprobs"][0]["logprob"] == pytest.approx(entry["logprob"])
    several = chat(loop, engine, user("Write a word."), temperature=1.0, seed=5, max_tokens=6, n=2)
    assert [c["index"] for c in several["choices"]] == [0, 1]
    assert all(c["finish_reason"] in ("stop", "length") for c in several["choices"])
    assert 2 <= several["usage"]["completion_tokens"] <= 12  # both choices counted, each at most 6


def test_prompt_prefix_reuse_changes_nothing_but_the_work(loop, weights, engine) -> None:  # type: ignore[no-untyped-def]
    """A prompt starting like a finished request's (the chat template's system prompt at least) is prefilled from
    the shared prefix on, and answers exactly as a model without the prompt cache does, alone and in a batch."""
    fresh = _make(loop, weights, "unit-mlx-no-prefix", max_num_seqs=3, max_model_len=512, prompt_cache_mib=0)
    prompts = ["Name three colors.", "What is 2+2?", "Say hello in French.", "Name three colors. And a fourth?"]

    async def burst(target):  # type: ignore[no-untyped-def]
        requests = [target.chat({"messages": user(p), "temperature": 0, "max_tokens": 10}) for p in prompts]
        return [content(r) for r in await asyncio.gather(*requests)]

    try:
        one_by_one = [content(chat(loop, engine, user(p), temperature=0, max_tokens=10)) for p in prompts]
        reused = engine.stats()["prompt_tokens_reused"]
        assert reused >= 3 * 20  # each prompt after the first found at least the system prompt's tokens
        together = loop.run_until_complete(burst(engine))
        assert engine.stats()["prompt_tokens_reused"] > reused
        reference = [content(chat(loop, fresh, user(p), temperature=0, max_tokens=10)) for p in prompts]
        assert fresh.stats()["prompt_tokens_reused"] == 0
        assert one_by_one == together == reference
    finally:
        loop.run_until_complete(fresh.unload())


def test_single_sequence_mode(loop, weights, engine) -> None:  # type: ignore[no-untyped-def]
    solo = _make(loop, weights, "unit-mlx-solo", max_num_seqs=1, max_model_len=512)
    try:
        assert solo.stats()["mode"] == "single"
        expected = content(chat(loop, engine, QUESTION, temperature=0, max_tokens=12, stop=["."]))
        assert content(chat(loop, solo, QUESTION, temperature=0, max_tokens=12, stop=["."])) == expected

        async def cancel_one():  # type: ignore[no-untyped-def]
            stream = await solo.chat_stream(
                {"messages": user("Tell me a long story."), "max_tokens": 300, "ignore_eos": True}
            )
            await stream.next_batch()
            stream.cancel()
            queued = await solo.chat({"messages": QUESTION, "temperature": 0, "max_tokens": 12})
            return queued, solo.stats()

        queued, stats = loop.run_until_complete(cancel_one())
        assert "Paris" in content(queued) and stats["aborted"] == 1 and stats["running"] == 0
    finally:
        loop.run_until_complete(solo.unload())
