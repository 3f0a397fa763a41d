"""The Transformers LLM engine on real weights: the bundled SmolLM2-135M-Instruct GGUF, converted once into a
safetensors folder with Transformers' own GGUF loader and cached outside the repository.

In-process tests cover sampling, stop conditions, continuous batching (join, leave, bound) and abort; one test
registers the folder as a custom pytorch model on the shared server and chats with it through the OpenAI SDK.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from benchmark._weights import converted_smollm2  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402
from xinference.engines.transformers.engine import TransformersEngine  # noqa: E402
from xinference.errors import ContextLengthExceeded, UnsupportedOption  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture(scope="module")
def weights() -> Path:
    return converted_smollm2()


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(loop, weights):
    family = ModelRegistry().get("smollm2-instruct")
    spec = next(s for s in family.model_specs if s.model_format == "pytorch")
    engine = TransformersEngine(
        model_uid="unit-tf",
        family=family,
        spec=spec,
        quantization="none",
        model_path=str(weights),
        config=TransformersEngine.parse_config({"max_num_seqs": 3, "max_model_len": 512}),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def chat(loop, engine, messages, **params):
    return loop.run_until_complete(engine.chat({"messages": messages, **params}))


def content(reply) -> str:
    return reply["choices"][0]["message"]["content"]


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_greedy_chat_knows_paris(loop, engine) -> None:
    reply = chat(loop, engine, QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in content(reply) and reply["model"] == "unit-tf"
    assert reply["choices"][0]["finish_reason"] == "stop"  # the template's <|im_end|> ended it
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 10 and 0 < usage["completion_tokens"] < 16
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_max_tokens_stop_strings_and_seed(loop, engine) -> None:
    short = chat(loop, engine, QUESTION, temperature=0, max_tokens=3)
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 3
    stopped = chat(loop, engine, QUESTION, temperature=0, max_tokens=16, stop=[" Paris"])
    assert "Paris" not in content(stopped) and content(stopped).startswith("The capital")
    assert stopped["choices"][0]["finish_reason"] == "stop"
    sampled = [
        content(chat(loop, engine, user("Say something."), temperature=1.0, top_p=0.9, top_k=40, seed=7, max_tokens=8))
        for _ in range(2)
    ]
    assert sampled[0] == sampled[1]
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


def test_completions(loop, engine) -> None:
    reply = loop.run_until_complete(
        engine.completions({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
    )
    assert reply["object"] == "text_completion" and "Paris" in reply["choices"][0]["text"]


def test_batched_greedy_matches_solo_and_respects_max_num_seqs(loop, engine) -> None:
    prompts = ["Hi there", "Name three colors.", "What is 2+2?", "Say hello in French.", "Count to three."]
    solo = [content(chat(loop, engine, user(p), temperature=0, max_tokens=10)) for p in prompts[:2]]

    async def together():
        return await asyncio.gather(
            *(engine.chat({"messages": user(p), "temperature": 0, "max_tokens": 10}) for p in prompts)
        )

    replies = loop.run_until_complete(together())
    assert [content(r) for r in replies[:2]] == solo  # left padding and per-row positions change nothing
    stats = engine.stats()
    assert stats["max_batch_seen"] == 3 == stats["max_num_seqs"]  # five requests, never more than three rows


def test_short_request_passes_a_long_one_and_abort_frees_the_row(loop, engine) -> None:
    async def scenario():
        long = await engine.chat_stream(
            {"messages": user("Tell me a very long story."), "max_tokens": 200, "ignore_eos": True, "temperature": 0}
        )
        first, _ = await long.next_batch()
        short = await engine.chat({"messages": user("Hi"), "max_tokens": 3, "temperature": 0})
        assert not long.finished  # the short one joined the running batch and left before the long one
        long.cancel()
        for _ in range(100):
            if engine.stats()["running"] == 0:
                break
            await asyncio.sleep(0.05)
        return first, short, engine.stats()

    first, short, stats = loop.run_until_complete(scenario())
    assert first[0]["choices"][0]["delta"]["role"] == "assistant"
    assert short["usage"]["completion_tokens"] == 3
    assert stats["running"] == 0


def test_stream_chunks_and_usage(loop, engine) -> None:
    async def scenario():
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
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]] == [
        "stop"
    ]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_request_errors(loop, engine) -> None:
    with pytest.raises(ContextLengthExceeded, match="512"):
        chat(loop, engine, user("word " * 600), max_tokens=4)
    with pytest.raises(UnsupportedOption, match="n is at most"):  # several choices, but not without bound
        chat(loop, engine, user("hi"), n=1000)


def test_served_as_custom_pytorch_model(local_server: LocalServer, weights) -> None:
    from openai import OpenAI

    name = "smollm2-135m-pytorch-local"
    family = {
        "model_name": name,
        "model_ability": ["chat", "generate"],
        "context_length": 2048,
        "stop_token_ids": [2],
        "stop": ["<|im_end|>"],
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_135",
                "quantizations": ["none"],
                "model_uri": f"file://{weights}",
            }
        ],
    }
    registered = httpx.post(f"{local_server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(f"{local_server.api}/models", json={"model_name": name, "max_num_seqs": 2}, timeout=180)
        assert launched.status_code == 200, launched.text
        assert launched.json()["model_engine"] == "Transformers"  # llama.cpp declined the pytorch weights
        client = OpenAI(base_url=local_server.api, api_key="x")
        reply = client.chat.completions.create(model=name, messages=QUESTION, temperature=0, max_tokens=16)
        assert "Paris" in reply.choices[0].message.content
        stream = client.chat.completions.create(
            model=name,
            messages=QUESTION,
            temperature=0,
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        assert "Paris" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert chunks[-1].usage.completion_tokens > 0
    finally:
        httpx.delete(f"{local_server.api}/models/{name}", timeout=60)
        httpx.delete(f"{local_server.api}/model_registrations/LLM/{name}", timeout=30)
