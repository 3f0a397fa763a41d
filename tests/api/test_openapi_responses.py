"""The OpenAPI document describes the 200 of every OpenAI-style route, and real answers validate against it.

The routes send the engines' dicts without validating them (bodies can be large, and this is every request's path):
``test_bodies_are_not_revalidated_per_request`` proves that a body is passed through untouched, so the schemas
are checked here, against real answers of the session's server, instead of on each request.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.api.openapi_schema import assert_matches_openapi
from xinference.api.app import create_app

#: route → the model its 200 is documented by, and whether it may answer an event stream instead
DOCUMENTED = {
    ("post", "/v1/chat/completions"): ("ChatCompletion", True),
    ("post", "/v1/completions"): ("Completion", True),
    ("post", "/v1/embeddings"): ("EmbeddingList", False),
    ("post", "/v1/rerank"): ("RerankList", False),
    ("get", "/v1/models"): ("ModelList", False),
    ("get", "/v1/models/{model_uid}"): ("ModelCard", False),
    ("post", "/v1/messages"): ("Message", True),
    ("post", "/anthropic/v1/messages"): ("Message", True),
    ("post", "/v1/messages/count_tokens"): ("TokenCount", False),
    ("post", "/v1/responses"): ("ResponseObject", True),
    ("get", "/v1/responses/{response_id}"): ("ResponseObject", False),
    ("get", "/v1/responses/{response_id}/input_items"): ("InputItemList", False),
    ("delete", "/v1/responses/{response_id}"): ("DeletedResponse", False),
    ("post", "/v1/images/generations"): ("ImagesResponse", False),
    ("post", "/v1/images/edits"): ("ImagesResponse", False),
}


@pytest.mark.parametrize(("method", "path"), sorted(DOCUMENTED))
def test_every_route_documents_its_200(method: str, path: str) -> None:
    document = create_app("127.0.0.1:1").openapi()
    model, streams = DOCUMENTED[(method, path)]
    content = document["paths"][path][method]["responses"]["200"]["content"]
    assert content["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
    assert ("text/event-stream" in content) is streams
    assert document["components"]["schemas"][model]["required"]  # a real schema, not an empty object


class _PassThrough:
    """Stands in for GenerationService: answers a body that matches no response model."""

    async def create(self, kind: str, body: Any) -> dict[str, Any]:
        return {"not": "a chat completion", "big": list(range(1000))}


def test_bodies_are_not_revalidated_per_request() -> None:
    app = create_app("127.0.0.1:1")
    app.state.generation = _PassThrough()
    client = TestClient(app, base_url="http://127.0.0.1")  # no lifespan: no supervisor needed
    reply = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    # had FastAPI validated the body against ChatCompletion, this would be a 500 (ResponseValidationError)
    assert reply.status_code == 200 and reply.json()["not"] == "a chat completion"


# -- real answers of the session's server -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def http(local_server) -> httpx.Client:
    with httpx.Client(base_url=local_server.endpoint, timeout=120) as client:
        yield client


HI = [{"role": "user", "content": "Say hi."}]


def test_real_chat_and_completion_bodies_match(http: httpx.Client, endpoint: str, model_uid: str) -> None:
    chat = http.post("/v1/chat/completions", json={"model": model_uid, "messages": HI, "max_tokens": 8})
    assert chat.status_code == 200, chat.text
    assert_matches_openapi(endpoint, "post", "/v1/chat/completions", chat.json())
    completion = http.post("/v1/completions", json={"model": model_uid, "prompt": "Once upon", "max_tokens": 8})
    assert completion.status_code == 200, completion.text
    assert_matches_openapi(endpoint, "post", "/v1/completions", completion.json())


def test_real_model_list_and_card_match(http: httpx.Client, endpoint: str, model_uid: str) -> None:
    assert_matches_openapi(endpoint, "get", "/v1/models", http.get("/v1/models").json())
    assert_matches_openapi(endpoint, "get", "/v1/models/{model_uid}", http.get(f"/v1/models/{model_uid}").json())


def test_real_messages_bodies_match(http: httpx.Client, endpoint: str, model_uid: str) -> None:
    message = http.post("/v1/messages", json={"model": model_uid, "messages": HI, "max_tokens": 8})
    assert message.status_code == 200, message.text
    assert_matches_openapi(endpoint, "post", "/v1/messages", message.json())
    count = http.post("/v1/messages/count_tokens", json={"model": model_uid, "messages": HI})
    assert_matches_openapi(endpoint, "post", "/v1/messages/count_tokens", count.json())


def test_real_responses_bodies_match(http: httpx.Client, endpoint: str, model_uid: str) -> None:
    created = http.post("/v1/responses", json={"model": model_uid, "input": "Say hi.", "max_output_tokens": 8})
    assert created.status_code == 200, created.text
    body = created.json()
    assert_matches_openapi(endpoint, "post", "/v1/responses", body)
    stored = http.get(f"/v1/responses/{body['id']}").json()
    assert_matches_openapi(endpoint, "get", "/v1/responses/{response_id}", stored)
    items = http.get(f"/v1/responses/{body['id']}/input_items").json()
    assert_matches_openapi(endpoint, "get", "/v1/responses/{response_id}/input_items", items)
    deleted = http.delete(f"/v1/responses/{body['id']}").json()
    assert_matches_openapi(endpoint, "delete", "/v1/responses/{response_id}", deleted)
