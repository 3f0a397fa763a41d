"""Chat and text completions through the real server, driven by the plain ``openai`` SDK."""

from __future__ import annotations

import openai
import pytest

SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def client(local_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=local_server.api, api_key="not-needed", max_retries=0, timeout=120)


def _messages() -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


def test_chat_greedy_answers_paris(client: openai.OpenAI, model_uid: str) -> None:
    reply = client.chat.completions.create(model=model_uid, messages=_messages(), temperature=0, max_tokens=24)
    assert "Paris" in reply.choices[0].message.content
    assert reply.model == model_uid
    assert reply.usage.prompt_tokens > 5 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_chat_is_deterministic_with_seed(client: openai.OpenAI, model_uid: str) -> None:
    kwargs = dict(
        model=model_uid,
        messages=[{"role": "user", "content": "Name a fruit."}],
        max_tokens=12,
        temperature=0.9,
        top_p=0.95,
        seed=1234,
        presence_penalty=0.1,
        frequency_penalty=0.1,
    )
    first = client.chat.completions.create(**kwargs).choices[0].message.content
    second = client.chat.completions.create(**kwargs).choices[0].message.content
    assert first == second


def test_chat_stream_with_usage(client: openai.OpenAI, model_uid: str) -> None:
    stream = client.chat.completions.create(
        model=model_uid,
        messages=_messages(),
        temperature=0,
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Paris" in text
    assert all(c.model == model_uid for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_stream_without_usage_option_has_no_usage(client: openai.OpenAI, model_uid: str) -> None:
    chunks = list(
        client.chat.completions.create(
            model=model_uid,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=4,
            stream=True,
        )
    )
    assert chunks and all(c.usage is None for c in chunks)


def test_max_tokens_and_stop(client: openai.OpenAI, model_uid: str) -> None:
    limited = client.chat.completions.create(
        model=model_uid, messages=[{"role": "user", "content": "Tell me a long story."}], max_tokens=5, temperature=0
    )
    assert limited.usage.completion_tokens == 5
    assert limited.choices[0].finish_reason == "length"
    stopped = client.chat.completions.create(
        model=model_uid, messages=_messages(), temperature=0, max_tokens=24, stop=["Paris"]
    )
    assert "Paris" not in stopped.choices[0].message.content
    assert stopped.choices[0].finish_reason == "stop"


def test_completions(client: openai.OpenAI, model_uid: str) -> None:
    done = client.completions.create(model=model_uid, prompt="The capital of France is", max_tokens=6, temperature=0)
    assert "Paris" in done.choices[0].text
    assert done.model == model_uid and done.usage.completion_tokens > 0


def test_completions_stream_with_usage(client: openai.OpenAI, model_uid: str) -> None:
    chunks = list(
        client.completions.create(
            model=model_uid,
            prompt="The capital of France is",
            max_tokens=6,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "Paris" in "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6


def test_models_list_through_sdk(client: openai.OpenAI, model_uid: str) -> None:
    ids = [m.id for m in client.models.list()]
    assert model_uid in ids
