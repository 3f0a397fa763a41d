"""Open WebUI's OpenAI connection to this server, replayed against a real server with the libraries it uses.

Source: ``open-webui/open-webui``, ``backend/open_webui/routers/openai.py`` (``send_get_request``,
``get_all_models``, ``verify_connection``, ``generate_chat_completion``) and ``backend/open_webui/retrieval/utils.py``
(``generate_openai_batch_embeddings``). An "OpenAI API" connection is a base URL (``http://HOST:9997/v1``) and a
key, possibly empty:

- the connection check ("verify") and the model list: aiohttp ``GET {url}/models`` with ``Content-Type:
  application/json`` and ``Authorization: Bearer {key}``; it takes ``data`` (or a bare list), keeps entries with an
  ``id`` (or ``name``), names them by ``name`` or else ``id``; a non-200 answer shows ``error`` from the body.
- chat: aiohttp ``POST {url}/chat/completions`` with the JSON body as text and the same headers; the model's
  parameters (temperature, max_tokens (``max_completion_tokens`` is renamed to it for non-OpenAI URLs), seed,
  stop, ...) in the body, ``stream_options.include_usage`` on streams (the frontend asks for usage; recent releases
  always add it). A ``text/event-stream`` answer is relayed as it comes and its ``data:`` lines parsed (deltas'
  ``content``, the final ``usage``, ``[DONE]``); anything else is read as JSON, and an error status relays the body
  (``error.message``) as it is.
- RAG embeddings: requests ``POST {url}/embeddings`` with ``{"input": [texts], "model": id}``, the same headers,
  ``raise_for_status``, then ``[item["embedding"] for item in body["data"]]`` in the order given (it does not sort
  by ``index``).

The keyed variant (a server with ``XINFERENCE_API_KEYS``) is in ``test_with_api_keys.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import numpy as np
import requests

from tests.conftest import LocalServer


def headers(key: str) -> dict[str, str]:
    """Open WebUI's headers: its bearer is sent even when the key is empty (``Bearer ``)."""
    return {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}


async def get_models(url: str, key: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession(trust_env=True, timeout=aiohttp.ClientTimeout(total=10)) as session:
        async with session.get(f"{url}/models", headers=headers(key)) as r:
            return r.status, await r.json()


async def post_chat(url: str, key: str, payload: dict[str, Any]) -> tuple[int, str, list[bytes] | Any]:
    """(status, content type, the raw lines of an event stream or the JSON body) as Open WebUI tells them apart."""
    async with aiohttp.ClientSession(trust_env=True, timeout=aiohttp.ClientTimeout(total=120)) as session:
        r = await session.request("POST", f"{url}/chat/completions", data=json.dumps(payload), headers=headers(key))
        content_type = r.headers.get("Content-Type", "")
        if "text/event-stream" in content_type:
            lines = [line async for line in r.content]
            return r.status, content_type, lines
        return r.status, content_type, await r.json()


def model_names(listing: Any) -> dict[str, str]:
    """``get_all_models``' view of a listing: id -> display name."""
    models = listing if isinstance(listing, list) else listing.get("data", [])
    names = {}
    for model in models:
        if "name" in model and model["name"] is None:
            del model["name"]
        if model.get("id") or model.get("name"):
            names[model["id"]] = model.get("name", model["id"])
    return names


def test_verify_and_list(local_server: LocalServer, model_uid: str, embedding_uid: str) -> None:
    status, body = asyncio.run(get_models(local_server.api, ""))
    assert status == 200
    names = model_names(body)
    assert names[model_uid] == model_uid and names[embedding_uid] == embedding_uid
    assert all(isinstance(n, str) for n in names.values())


def parse_stream(lines: list[bytes]) -> tuple[str, dict[str, Any] | None, bool]:
    """Open WebUI's reading of the relayed stream: text of the deltas, the usage chunk, whether ``[DONE]`` came."""
    text, usage, done = "", None, False
    for raw in lines:
        line = raw.decode("utf-8", errors="ignore").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            done = True
            continue
        chunk = json.loads(data)
        choices = chunk.get("choices", [])
        if chunk.get("usage"):
            usage = chunk["usage"]
        if choices:
            text += choices[0].get("delta", {}).get("content") or ""
    return text, usage, done


def test_streaming_chat(local_server: LocalServer, model_uid: str) -> None:
    payload = {
        "model": model_uid,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.8,
        "max_tokens": 24,
        "seed": 42,
    }
    status, content_type, lines = asyncio.run(post_chat(local_server.api, "", payload))
    assert status == 200 and "text/event-stream" in content_type
    assert isinstance(lines, list)
    text, usage, done = parse_stream(lines)
    assert text.strip() and done
    assert usage is not None and usage["completion_tokens"] > 0 and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_streaming_chat_without_stream_options(local_server: LocalServer, model_uid: str) -> None:
    """Older releases send no ``stream_options``: the stream is the same, without a usage chunk."""
    payload = {"model": model_uid, "messages": [{"role": "user", "content": "Hi"}], "stream": True, "max_tokens": 8}
    status, _, lines = asyncio.run(post_chat(local_server.api, "", payload))
    assert status == 200 and isinstance(lines, list)
    text, usage, done = parse_stream(lines)
    assert text and usage is None and done


def test_blocking_chat(local_server: LocalServer, model_uid: str) -> None:
    """A title or tags task: ``stream: false``, read as JSON."""
    payload = {
        "model": model_uid,
        "messages": [{"role": "user", "content": "Give a three-word title for a chat about Paris."}],
        "stream": False,
        "max_tokens": 12,
    }
    status, content_type, body = asyncio.run(post_chat(local_server.api, "", payload))
    assert status == 200 and content_type.startswith("application/json")
    assert isinstance(body["choices"][0]["message"]["content"], str) and "usage" in body


def test_unknown_model_is_a_json_error(local_server: LocalServer) -> None:
    """A stream asked of a model that is not there answers JSON (not an event stream), which Open WebUI relays
    with its status; it shows ``error.message``."""
    payload = {"model": "absent-model", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    status, content_type, body = asyncio.run(post_chat(local_server.api, "", payload))
    assert status == 404 and "text/event-stream" not in content_type
    assert "absent-model" in body["error"]["message"]


def test_rag_embeddings(local_server: LocalServer, embedding_uid: str) -> None:
    texts = ["The weather is lovely today.", "It is sunny and warm outside.", "He drove the truck to the depot."]
    r = requests.post(
        f"{local_server.api}/embeddings", headers=headers(""), json={"input": texts, "model": embedding_uid}, timeout=60
    )
    r.raise_for_status()
    data = r.json()
    assert [item["index"] for item in data["data"]] == [0, 1, 2]
    vectors = np.array([item["embedding"] for item in data["data"]])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2
    # a query is embedded alone, in a list of one, and lands next to its passage
    q = requests.post(
        f"{local_server.api}/embeddings", headers=headers(""), json={"input": [texts[1]], "model": embedding_uid}
    )
    q.raise_for_status()
    assert np.allclose(q.json()["data"][0]["embedding"], vectors[1], atol=1e-5)
