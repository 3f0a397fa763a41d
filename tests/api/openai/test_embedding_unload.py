"""An embedding request caught by the model's unload answers 503 with the error envelope, not a 500 or a hang
(issue 13, item 9: the batcher failed such requests with a bare ``RuntimeError``, and one in a forward pass was
never answered).

The route table, embedding service, router and error handlers are the real ones, and so is the engine (the bundled
all-MiniLM-L6-v2, loaded in this process); the model actor is a stand-in that calls the engine directly. The
engine's forward pass is held on an event so the unload lands while one request is in the pass and one is queued.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

pytest.importorskip("sentence_transformers")

from xinference.api.errors import install_error_handlers  # noqa: E402
from xinference.api.gateway.routes import Replica, Route, RouteTable  # noqa: E402
from xinference.api.openai import embeddings as embeddings_router  # noqa: E402
from xinference.api.openai.embeddings import EmbeddingService  # noqa: E402
from xinference.engines.sentence_transformers.engine import SentenceTransformersEngine  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.download import resolve_model_path  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

UID = "unload-minilm"


class StandInModelActor:
    """Test double of a model actor: forwards ``embed`` to an engine in this process."""

    def __init__(self, engine: SentenceTransformersEngine) -> None:
        self.engine = engine

    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self.engine.embed(request)


def build_app(engine: SentenceTransformersEngine) -> FastAPI:
    table = RouteTable(supervisor=None)
    table._routes[UID] = Route(UID, "embedding", ["embed"], replicas=[Replica("stand-in", StandInModelActor(engine))])
    table._stale = False
    app = FastAPI()
    install_error_handlers(app)
    embeddings_router.attach_router(app)
    app.state.embeddings = EmbeddingService(table)
    return app


async def _wait_until(condition: Any, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def test_requests_caught_by_an_unload_get_503_envelopes() -> None:
    family = ModelRegistry().get("all-MiniLM-L6-v2")
    engine = SentenceTransformersEngine(
        model_uid=UID,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=resolve_model_path(family.model_specs[0], "none"),
        config=SentenceTransformersEngine.parse_config({"batch_window_ms": 0}),
        hardware=detect_hardware(),
    )
    release = threading.Event()
    entered = threading.Event()

    async def scenario() -> list[httpx.Response]:
        await engine.load()
        batcher = engine._batcher
        assert batcher is not None
        real_forward = batcher._forward

        def held_forward(texts: list[str]) -> list[Any]:
            entered.set()
            release.wait(30)
            return real_forward(texts)

        batcher._forward = held_forward
        transport = httpx.ASGITransport(app=build_app(engine), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            body = {"model": UID, "input": "a sentence that meets the unload"}
            in_pass = asyncio.create_task(client.post("/v1/embeddings", json=body))
            await _wait_until(entered.is_set, "the first request's forward pass")
            queued = asyncio.create_task(client.post("/v1/embeddings", json=body))
            # queued in the batcher, or already formed into the round that waits behind the running one
            await _wait_until(
                lambda: bool(batcher._pending) or len(batcher._serving) > 1, "the second request to queue"
            )
            await engine.unload()
            try:
                return list(await asyncio.wait_for(asyncio.gather(in_pass, queued), 30))
            finally:
                release.set()

    responses = asyncio.run(scenario())
    for response in responses:
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["type"] == "service_unavailable" and error["code"] == "model_unavailable"
        assert "unloaded" in error["message"]
        assert response.headers.get("retry-after") == "1"
