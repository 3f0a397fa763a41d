"""Dify's Xinference provider, replayed call by call against a real server.

Source: the plugin in ``langgenius/dify-official-plugins``, folder ``models/xinference`` (read at commit
7af22831a58d, August 2026). Its modules need the ``dify_plugin`` SDK, which would downgrade httpx, requests and
tiktoken here and bring gevent, so they are not imported: each test makes the requests they make, with the
libraries they use (requests, the ``openai`` SDK, the official ``xinference_client``), and reads the answers the way
they read them.

- ``models/xinference_helper.py``: ``GET {server_url}/v1/models/{uid}`` (a requests session with 3 retries, 10 s
  timeout, ``Authorization: Bearer`` only when a key is set). From the body: ``model_type`` (``embedding``,
  ``audio`` or else), ``model_ability`` (chat / generate / tools / vision), ``model_format``, ``model_name``,
  ``model_family``, ``max_tokens`` (default 512) and ``context_length`` (default 2048). The LLM and the embedding
  model validate their credentials with it and keep ``context_length`` / ``max_tokens`` as the model's size.
- ``models/llm/llm.py``: the credentials check above; then every call builds ``xinference_client``'s ``Client``
  (``GET /v1/cluster/auth``), ``get_model(uid)`` (``GET /v1/models/{uid}``) and, for a chat handle, the OpenAI SDK's
  ``chat.completions.create(model=uid, messages, stream, user, temperature (clamped to 0.01-0.99), top_p,
  max_tokens, presence_penalty, frequency_penalty[, stop][, tools])``, with
  ``extra_body={"chat_template_kwargs": {"enable_thinking": b}, "thinking": b}`` when its Think switch is set.
  Messages: system/user strings or content parts, an assistant turn with a tool call as a legacy
  ``function_call``, tool results with ``tool_call_id`` and ``name``. It reads ``choices[0].message`` (content,
  tool_calls, function_call) or, streaming, each chunk's ``delta`` and ``finish_reason``, and
  ``system_fingerprint``.
  A model that generates but does not chat gets a generate handle and the completion mode instead:
  ``completions.create(model=uid, prompt=<the messages' text joined>, stream, user, <same sampling fields>)``,
  reading ``choices[0].text`` and ``finish_reason``.
- ``models/text_embedding/text_embedding.py``: credentials: the helper, ``Client.get_model`` must be a
  ``RESTfulEmbeddingModelHandle``, then one embedding of ``["ping"]``; a call:
  ``RESTfulEmbeddingModelHandle(uid, server_url, auth_headers).create_embedding(input=texts)``, reading
  ``usage.total_tokens`` and ``data[*].embedding``.
- ``models/rerank/rerank.py``: credentials: ``Client.get_model`` must be a ``RESTfulRerankModelHandle``, then one
  rerank; a call: ``RESTfulRerankModelHandle(...).rerank(documents, query, top_n, return_documents=True)``
  (``POST /v1/rerank``; on a "rerank hasn't support extra parameter" error it retries without the client's
  ``kwargs`` field), reading ``results[*].index``, ``document`` (a string or ``{"text"}``) and ``relevance_score``.

The keyed variants (a server with ``XINFERENCE_API_KEYS``) are in ``test_with_api_keys.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
from openai import OpenAI
from requests.adapters import HTTPAdapter
from xinference_client.client.restful.restful_client import (
    Client,
    RESTfulChatModelHandle,
    RESTfulEmbeddingModelHandle,
    RESTfulGenerateModelHandle,
    RESTfulRerankModelHandle,
)
from yarl import URL

from tests.conftest import LocalServer
from tests.custom_models import link_smollm2_gguf, smollm2_gguf_family

#: a registration of the bundled SmolLM2 weights that only generates: what Dify drives in its completion mode
BASE_MODEL = "integrations-smol-generate"

#: the documents and query Dify's rerank credential check sends
KASUMI_QUERY = "Whose kasumi"
KASUMI_DOCS = [
    'Kasumi is a girl\'s name of Japanese origin meaning "mist".',
    "Her music is a kawaii bass, a mix of future bass, pop, and kawaii music ",
    "and she leads a team named PopiParty.",
]


def describe(server_url: str, uid: str, api_key: str | None = None) -> requests.Response:
    """The helper's request: the URL joined by yarl, a session retrying 3 times, a 10 s timeout."""
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=3))
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return session.get(str(URL(server_url) / "v1" / "models" / uid), headers=headers, timeout=10)


def dify_view(body: dict[str, Any]) -> dict[str, Any]:
    """What the helper keeps of a description, with its defaults, and what the LLM's check derives from it."""
    ability = body.get("model_ability", [])
    return {
        "model_format": body.get("model_format", "ggmlv3"),
        "model_ability": ability,
        "model_family": body.get("model_family", None),
        "support_function_call": "tools" in ability,
        "support_vision": "vision" in ability,
        "max_tokens": body.get("max_tokens", 512),
        "context_length": body.get("context_length", 2048),
        "completion_type": "chat" if "chat" in ability else "completion" if "generate" in ability else None,
    }


def dify_openai(server: LocalServer, api_key: str | None = None) -> OpenAI:
    """The SDK client the LLM builds per call: ``abc`` when no key is set, the default retries and timeout."""
    return OpenAI(base_url=f"{server.endpoint}/v1", api_key=api_key or "abc", max_retries=3, timeout=60)


def generate_config(**overrides: Any) -> dict[str, Any]:
    """The sampling fields the LLM always sends (its defaults), then the caller's."""
    config: dict[str, Any] = {
        "temperature": 1.0,
        "top_p": 0.7,
        "max_tokens": 512,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    config.update(overrides)
    return config


def test_llm_credentials(local_server: LocalServer, model_uid: str) -> None:
    response = describe(local_server.endpoint, model_uid)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_type"] == "LLM" and isinstance(body["model_name"], str)
    view = dify_view(body)
    assert isinstance(view["model_format"], str) and view["model_format"] == "ggufv2"
    assert isinstance(view["model_ability"], list) and all(isinstance(a, str) for a in view["model_ability"])
    assert view["completion_type"] == "chat"
    # the chat model's size as Dify offers it for max_tokens (its rule's maximum) and the context it shows
    assert isinstance(view["context_length"], int) and view["context_length"] > 0
    assert "context_length" in body, "Dify would assume 2048"
    assert view["support_function_call"] is False and view["support_vision"] is False
    assert isinstance(Client(base_url=local_server.endpoint, api_key=None).get_model(model_uid), RESTfulChatModelHandle)


def test_llm_tool_ability_is_in_model_ability(local_server: LocalServer) -> None:
    """Dify offers tool calling when ``model_ability`` lists ``tools``: a family with a tool-call format lists it
    there (checked on the catalog's description of qwen2.5-instruct, which is not launched)."""
    response = requests.get(f"{local_server.api}/model_registrations/LLM/qwen2.5-instruct", timeout=10)
    assert response.status_code == 200, response.text
    assert "tools" in response.json()["model_ability"]


def test_llm_blocking_chat(local_server: LocalServer, model_uid: str) -> None:
    client = dify_openai(local_server)
    handle = Client(base_url=local_server.endpoint, api_key=None).get_model(model_uid)
    assert isinstance(handle, RESTfulChatModelHandle)
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]},
    ]
    resp = client.chat.completions.create(
        model=model_uid,
        messages=messages,  # type: ignore[arg-type]
        stream=False,
        user=None,  # Dify passes its user id, None when it has none
        **generate_config(temperature=0.01, max_tokens=24, stop=["\n\n"]),
    )
    assert len(resp.choices) > 0
    message = resp.choices[0].message
    assert isinstance(message.content, str) and message.content.strip()
    assert not message.tool_calls and message.function_call is None
    assert resp.system_fingerprint is None or isinstance(resp.system_fingerprint, str)


def stream_as_dify(chunks: Iterator[Any]) -> tuple[str, str | None, int]:
    """The LLM's stream loop: chunks without choices are skipped, so are empty deltas before the finish; returns the
    text, the finish reason and how many chunks it yielded."""
    text, finish, yielded = "", None, 0
    for chunk in chunks:
        if len(chunk.choices) == 0:
            continue
        choice = chunk.choices[0]
        if choice.finish_reason is None and not choice.delta.content:
            continue
        assert chunk.system_fingerprint is None or isinstance(chunk.system_fingerprint, str)
        assert not choice.delta.tool_calls and choice.delta.function_call is None
        yielded += 1
        text += choice.delta.content or ""  # the finishing chunk's content is shown too
        if choice.finish_reason is not None:
            finish = choice.finish_reason
    return text, finish, yielded


def test_llm_streaming_chat(local_server: LocalServer, model_uid: str) -> None:
    resp = dify_openai(local_server).chat.completions.create(
        model=model_uid,
        messages=[{"role": "user", "content": "Name three colours."}],
        stream=True,
        user="dify-user-1",
        **generate_config(temperature=0.99, max_tokens=24),
    )
    text, finish, yielded = stream_as_dify(iter(resp))
    assert text.strip() and finish in ("stop", "length") and yielded > 2


@pytest.mark.parametrize("think", [True, False])
def test_llm_think_switch(local_server: LocalServer, model_uid: str, think: bool) -> None:
    """Dify's Think parameter: ``chat_template_kwargs.enable_thinking`` and a boolean ``thinking``, both ways; a
    model that does not reason answers as usual."""
    resp = dify_openai(local_server).chat.completions.create(
        model=model_uid,
        messages=[{"role": "user", "content": "Say hello."}],
        stream=False,
        user=None,
        **generate_config(max_tokens=8),
        extra_body={"chat_template_kwargs": {"enable_thinking": think}, "thinking": think},
    )
    assert isinstance(resp.choices[0].message.content, str)


def test_llm_history_with_a_tool_call(local_server: LocalServer, model_uid: str) -> None:
    """A conversation that went through a tool: Dify writes the assistant's call as a legacy ``function_call`` and
    the result as a tool message naming the tool; the server takes the history as it is."""
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {"tool_call_id": "call-1", "role": "tool", "content": "Sunny, 21 C", "name": "get_weather"},
    ]
    resp = dify_openai(local_server).chat.completions.create(
        model=model_uid,
        messages=messages,  # type: ignore[arg-type]
        stream=False,
        user=None,
        **generate_config(max_tokens=16),
    )
    assert isinstance(resp.choices[0].message.content, str)


def test_embedding_credentials_and_call(local_server: LocalServer, embedding_uid: str) -> None:
    response = describe(local_server.endpoint, embedding_uid)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_type"] == "embedding"
    view = dify_view(body)
    # Dify chunks documents to this many tokens: the model's own input limit, not its 512 default
    assert "max_tokens" in body and view["max_tokens"] == 256
    handle = Client(base_url=local_server.endpoint, api_key=None).get_model(model_uid=embedding_uid)
    assert isinstance(handle, RESTfulEmbeddingModelHandle)
    direct = RESTfulEmbeddingModelHandle(embedding_uid, local_server.endpoint, {})
    for texts in (["ping"], ["first passage", "second passage", "third passage"]):
        result = direct.create_embedding(input=texts)
        assert isinstance(result["usage"]["total_tokens"], int) and result["usage"]["total_tokens"] > 0
        vectors = [item["embedding"] for item in result["data"]]
        assert len(vectors) == len(texts)
        assert all(len(v) == 384 and all(isinstance(x, float) for x in v) for v in vectors)


def test_embedding_check_refuses_a_chat_model(local_server: LocalServer, model_uid: str) -> None:
    """Dify's embedding check needs an embedding handle: the chat model's description gives it a chat one."""
    handle = Client(base_url=local_server.endpoint, api_key=None).get_model(model_uid=model_uid)
    assert not isinstance(handle, RESTfulEmbeddingModelHandle)


def test_rerank_credentials_and_call(local_server: LocalServer, rerank_uid: str) -> None:
    handle = Client(base_url=local_server.endpoint, api_key=None).get_model(model_uid=rerank_uid)
    assert isinstance(handle, RESTfulRerankModelHandle)
    direct = RESTfulRerankModelHandle(rerank_uid, local_server.endpoint, {})
    # the first call is the one that must work: no fallback without the client's extra "kwargs" field
    response = direct.rerank(documents=KASUMI_DOCS, query=KASUMI_QUERY, top_n=None, return_documents=True)
    results = response["results"]
    assert sorted(r["index"] for r in results) == [0, 1, 2]
    scores = []
    for result in results:
        document = result["document"]
        text = document if isinstance(document, str) else document["text"]
        assert text == KASUMI_DOCS[result["index"]]
        scores.append(float(result.get("relevance_score") or 0.0))
    assert scores == sorted(scores, reverse=True)
    top = direct.rerank(documents=KASUMI_DOCS, query=KASUMI_QUERY, top_n=2, return_documents=True)
    assert [r["index"] for r in top["results"]] == [r["index"] for r in results[:2]]


def test_unknown_uid(local_server: LocalServer) -> None:
    """A uid that is not running: the helper's request gets a 404 whose text Dify shows; ``get_model`` raises the
    RuntimeError Dify turns into a credentials error, with the server's message."""
    response = describe(local_server.endpoint, "no-such-model")
    assert response.status_code == 404
    assert "no-such-model" in response.json()["error"]["message"]
    with pytest.raises(RuntimeError, match="no-such-model"):
        Client(base_url=local_server.endpoint, api_key=None).get_model("no-such-model")


@pytest.fixture(scope="module")
def base_uid(local_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = link_smollm2_gguf(tmp_path_factory.mktemp("integrations-base"), BASE_MODEL)
    family = smollm2_gguf_family(BASE_MODEL, folder, ["generate"])
    registered = httpx.post(f"{local_server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    launched = httpx.post(
        f"{local_server.api}/models",
        json={"model_name": BASE_MODEL, "model_engine": "llama.cpp", "n_ctx": 2048, "n_parallel": 1},
        timeout=120,
    )
    assert launched.status_code == 200, launched.text
    yield BASE_MODEL
    httpx.delete(f"{local_server.api}/models/{BASE_MODEL}", timeout=60)
    httpx.delete(f"{local_server.api}/model_registrations/LLM/{BASE_MODEL}", timeout=30)


def test_llm_completion_mode(local_server: LocalServer, base_uid: str) -> None:
    view = dify_view(describe(local_server.endpoint, base_uid).json())
    assert view["completion_type"] == "completion" and view["context_length"] == 2048
    handle = Client(base_url=local_server.endpoint, api_key=None).get_model(base_uid)
    assert isinstance(handle, RESTfulGenerateModelHandle) and not isinstance(handle, RESTfulChatModelHandle)
    client = dify_openai(local_server)
    prompt = "You are a helpful assistant.The capital of France is"  # Dify joins the messages' text as it is
    blocking = client.completions.create(
        model=base_uid, prompt=prompt, stream=False, user=None, **generate_config(max_tokens=12)
    )
    assert len(blocking.choices) > 0 and isinstance(blocking.choices[0].text, str)
    assert blocking.system_fingerprint is None or isinstance(blocking.system_fingerprint, str)
    text, finish = "", None
    for chunk in client.completions.create(
        model=base_uid, prompt=prompt, stream=True, user="dify-user-1", **generate_config(max_tokens=12)
    ):
        if len(chunk.choices) == 0:
            continue
        text += chunk.choices[0].text or ""
        if chunk.choices[0].finish_reason is not None:
            finish = chunk.choices[0].finish_reason
    assert text and finish in ("stop", "length")
