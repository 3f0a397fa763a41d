"""Dify's provider and Open WebUI's connection against a server with ``XINFERENCE_API_KEYS`` set: the key where
each puts it (Dify: ``Authorization: Bearer`` on its description request, through ``xinference_client``'s
``Client`` once ``/v1/cluster/auth`` says auth is on, and as the OpenAI SDK's key; Open WebUI: ``Bearer {key}`` on
every request), and what each gets without it. The calls are those described in ``test_dify.py`` and
``test_open_webui.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import openai
import pytest
from xinference_client.client.restful.restful_client import Client, RESTfulChatModelHandle

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from tests.integrations.test_dify import describe, dify_openai, generate_config
from tests.integrations.test_open_webui import get_models, parse_stream, post_chat

pytestmark = pytest.mark.slow

KEY = "integration-key"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(tmp_path_factory.mktemp("keyed-home"), env={"XINFERENCE_API_KEYS": KEY})
    try:
        launched = httpx.post(
            f"{server.api}/models",
            json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=120,
        )
        assert launched.status_code == 200, launched.text
        yield server
    finally:
        server.stop_and_reap()


def test_dify_with_a_key(keyed_server: LocalServer) -> None:
    assert describe(keyed_server.endpoint, DEFAULT_MODEL, KEY).json()["model_type"] == "LLM"
    handle = Client(base_url=keyed_server.endpoint, api_key=KEY).get_model(DEFAULT_MODEL)
    assert isinstance(handle, RESTfulChatModelHandle)
    resp = dify_openai(keyed_server, KEY).chat.completions.create(
        model=DEFAULT_MODEL,
        messages=[{"role": "user", "content": "Hi"}],
        stream=False,
        user=None,
        **generate_config(max_tokens=8),
    )
    assert isinstance(resp.choices[0].message.content, str)


def test_dify_without_the_key(keyed_server: LocalServer) -> None:
    """No key in Dify's settings: the description request is a 401 (a credentials error in Dify), and chat sends
    the placeholder key ``abc``, which the SDK raises as an authentication error."""
    refused = describe(keyed_server.endpoint, DEFAULT_MODEL, None)
    assert refused.status_code == 401 and refused.json()["error"]["message"]
    with pytest.raises(RuntimeError):
        Client(base_url=keyed_server.endpoint, api_key=None).get_model(DEFAULT_MODEL)
    with pytest.raises(openai.AuthenticationError):
        dify_openai(keyed_server).with_options(max_retries=0).chat.completions.create(
            model=DEFAULT_MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )


def test_open_webui_with_a_key(keyed_server: LocalServer) -> None:
    status, body = asyncio.run(get_models(keyed_server.api, KEY))
    assert status == 200 and [m["id"] for m in body["data"]] == [DEFAULT_MODEL]
    payload = {
        "model": DEFAULT_MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 8,
    }
    status, _, lines = asyncio.run(post_chat(keyed_server.api, KEY, payload))
    assert status == 200 and isinstance(lines, list)
    text, usage, done = parse_stream(lines)
    assert text and usage and done


@pytest.mark.parametrize("key", ["", "wrong-key"])
def test_open_webui_verify_refused(keyed_server: LocalServer, key: str) -> None:
    """A wrong or empty key fails Open WebUI's connection check with the body's ``error``, which it shows."""
    status, body = asyncio.run(get_models(keyed_server.api, key))
    assert status == 401 and isinstance(body["error"], dict) and body["error"]["message"]
