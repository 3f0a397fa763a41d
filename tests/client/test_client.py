"""Tests for the Python client (xinference.client), against the session's real ``xinference-local``.

Generation is greedy (temperature 0) and short (max_tokens <= 16): the bundled model is tiny and runs on CPU.
A few answers the real server gives only on rare failures (an error frame after a stream started, a non-JSON
error body from a proxy) are served by ``httpx.MockTransport`` stand-ins, in the section marked as such.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

import xinference.client
import xinference.client.restful
from tests.conftest import DEFAULT_MODEL, free_port
from xinference.client import Client, ClientError

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."}
FRANCE = {"role": "user", "content": "What is the capital of France?"}


@pytest.fixture(scope="module")
def client(endpoint: str) -> Iterator[Client]:
    with Client(endpoint) as c:
        yield c


def test_exports() -> None:
    assert set(xinference.client.__all__) == {"DEFAULT_TIMEOUT", "Client", "ClientError"}
    for name in xinference.client.restful.__all__:
        assert hasattr(xinference.client.restful, name)


def test_status(client: Client) -> None:
    assert client.status() == {"status": "ok"}


def test_list_models_shows_the_default_model(client: Client) -> None:
    models = client.list_models()
    ours = [m for m in models if m["model_uid"] == DEFAULT_MODEL]
    assert len(ours) == 1
    assert ours[0]["model_name"] == DEFAULT_MODEL
    assert ours[0]["model_engine"] == "llama.cpp"
    assert ours[0]["model_type"] == "LLM"


def test_describe_model(client: Client) -> None:
    info = client.describe_model(DEFAULT_MODEL)
    assert info["model_uid"] == DEFAULT_MODEL
    assert info["model_name"] == DEFAULT_MODEL
    assert "chat" in info["model_ability"]


def test_chat(client: Client) -> None:
    reply = client.chat(DEFAULT_MODEL, [SYSTEM, FRANCE], max_tokens=16, temperature=0)
    assert reply["object"] == "chat.completion"
    assert "Paris" in reply["choices"][0]["message"]["content"]
    assert reply["usage"]["completion_tokens"] <= 16


def test_chat_stream(client: Client) -> None:
    chunks = list(client.chat(DEFAULT_MODEL, [SYSTEM, FRANCE], stream=True, max_tokens=16, temperature=0))
    assert chunks
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(choice["delta"].get("content") or "" for c in chunks for choice in c["choices"])
    assert "Paris" in text


def test_stream_and_non_stream_agree_when_greedy(client: Client) -> None:
    messages = [SYSTEM, FRANCE]
    full = client.chat(DEFAULT_MODEL, messages, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
    chunks = client.chat(DEFAULT_MODEL, messages, stream=True, max_tokens=8, temperature=0)
    streamed = "".join(choice["delta"].get("content") or "" for c in chunks for choice in c["choices"])
    assert streamed == full


def test_completions(client: Client) -> None:
    result = client.completions(DEFAULT_MODEL, "The capital of France is", max_tokens=8, temperature=0)
    assert result["object"] == "text_completion"
    assert isinstance(result["choices"][0]["text"], str)
    assert result["choices"][0]["text"]


def test_completions_stream(client: Client) -> None:
    chunks = list(client.completions(DEFAULT_MODEL, "One, two, three,", stream=True, max_tokens=8, temperature=0))
    text = "".join(choice.get("text") or "" for c in chunks for choice in c["choices"])
    assert text


def test_unknown_uid_is_a_404(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.describe_model("no-such-model")
    assert info.value.status_code == 404
    assert info.value.error_type == "not_found_error"
    assert "no-such-model" in info.value.message


def test_chat_with_unknown_uid_is_a_404_before_streaming(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.chat("no-such-model", [FRANCE], stream=True, max_tokens=4)
    assert info.value.status_code == 404


def test_terminate_unknown_uid_is_a_404(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.terminate_model("no-such-model")
    assert info.value.status_code == 404


def test_bad_request_is_a_400_naming_the_field(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.chat(DEFAULT_MODEL, [FRANCE], max_tokens=4, temperature=5)
    assert info.value.status_code == 400
    assert info.value.error_type == "invalid_request_error"
    assert "temperature" in info.value.message


def test_launch_with_a_bad_engine_option_is_a_400(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.launch_model(DEFAULT_MODEL, model_engine="llama.cpp", model_uid="client-bad-option", n_ctx="lots")
    assert info.value.status_code == 400
    assert "n_ctx" in info.value.message
    assert all(m["model_uid"] != "client-bad-option" for m in client.list_models())


def test_connection_refused_says_what_to_do() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with Client(dead, timeout=5) as c, pytest.raises(ClientError) as info:
        c.list_models()
    assert info.value.status_code is None
    assert dead in info.value.message
    assert "not reachable" in info.value.message
    assert "xinference-local" in info.value.message


def test_endpoint_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("XINFERENCE_ENDPOINT", endpoint + "/")
    with Client() as c:
        assert c.endpoint == endpoint
        assert c.status() == {"status": "ok"}


# -- stand-in answers (httpx.MockTransport), for failures the real server rarely gives ---------------------


def _sse(*frames: object) -> bytes:
    return b"".join(b"data: " + (f if isinstance(f, bytes) else json.dumps(f).encode()) + b"\n\n" for f in frames)


def test_error_frame_mid_stream_raises_after_earlier_chunks() -> None:
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}
    error = {"error": {"message": "the stream failed: boom", "type": "engine_error", "param": None, "code": None}}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse(chunk, error, b"[DONE]"), headers={"content-type": "text/event-stream"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        stream = c.chat("m", [FRANCE], stream=True)
        assert next(stream) == chunk
        with pytest.raises(ClientError) as info:
            next(stream)
    assert info.value.message == "the stream failed: boom"
    assert info.value.error_type == "engine_error"
    assert info.value.status_code is None


def test_stream_stops_at_done_and_skips_blank_lines() -> None:
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]}

    def answer(request: httpx.Request) -> httpx.Response:
        body = b": keep-alive\n\n" + _sse(chunk, b"[DONE]", chunk)
        return httpx.Response(200, content=body)

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        assert list(c.completions("m", "p", stream=True)) == [chunk]


def test_non_json_error_body_keeps_status_and_text() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="Bad Gateway from the proxy")

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c, pytest.raises(ClientError) as info:
        c.list_models()
    assert info.value.status_code == 502
    assert info.value.message == "Bad Gateway from the proxy"


def test_detail_only_error_body() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "Invalid credential"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c, pytest.raises(ClientError) as info:
        c.status()
    assert (info.value.status_code, info.value.message) == (401, "Invalid credential")


def test_api_key_is_sent_as_bearer_token() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"status": "ok"})

    with Client("http://stand-in", api_key="sk-test", transport=httpx.MockTransport(answer)) as c:
        c.status()
    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        c.status()
    assert seen == ["Bearer sk-test", None]


def test_launch_sends_engine_kwargs_and_returns_the_uid() -> None:
    bodies: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"model_uid": "u1", "model_engine": "llama.cpp", "status": "ready"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        assert c.launch_model("smollm2-instruct", model_uid="u1", n_gpu=None, n_ctx=512) == "u1"
    assert bodies[0]["n_ctx"] == 512
    assert bodies[0]["n_gpu"] is None
    assert bodies[0]["model_type"] == "LLM"
