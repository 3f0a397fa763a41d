"""API keys on the agent APIs: the Anthropic SDK's ``x-api-key`` is accepted beside Bearer, and a refusal on the
Messages routes is in Anthropic's error shape (a server without models: authentication comes first)."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from tests.conftest import start_local_server

pytestmark = pytest.mark.slow


def test_x_api_key_and_anthropic_shaped_401(tmp_path) -> None:
    server = start_local_server(tmp_path, env={"XINFERENCE_API_KEYS": "key-one"})
    body = {"model": "absent", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    try:
        refused = httpx.post(f"{server.endpoint}/v1/messages", json=body, headers={"x-api-key": "wrong"})
        assert refused.status_code == 401
        assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "authentication_error"
        openai_refused = httpx.post(f"{server.api}/responses", json={"model": "absent", "input": "hi"})
        assert openai_refused.status_code == 401 and openai_refused.json()["error"]["type"] == "authentication_error"
        for headers in ({"x-api-key": "key-one"}, {"Authorization": "Bearer key-one"}):
            passed = httpx.post(f"{server.endpoint}/anthropic/v1/messages", json=body, headers=headers)
            assert passed.status_code == 404 and passed.json()["error"]["type"] == "not_found_error"
        assert httpx.get(f"{server.api}/models", headers={"x-api-key": "key-one"}).status_code == 200
        client = anthropic.Anthropic(base_url=server.endpoint, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            client.messages.create(**body)
        with pytest.raises(anthropic.NotFoundError):
            anthropic.Anthropic(base_url=server.endpoint, api_key="key-one", max_retries=0).messages.create(**body)
    finally:
        server.stop()
