"""The FastAPI application: state, error handlers, middleware and routers, built by one factory."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Callable

from fastapi import FastAPI

from xinference import __version__, settings
from xinference.api.admin import (
    cache,
    chat_templates,
    cluster,
    engine_schemas,
    engines,
    envs,
    logs,
    operations,
    registrations,
    requests,
    ui,
)
from xinference.api.admin.models import router as models
from xinference.api.admin.models.serving import ModelsService
from xinference.api.admin.registrations import RegistrationsService
from xinference.api.anthropic import router as messages
from xinference.api.anthropic.serving import MessagesService
from xinference.api.auth import ApiKeyMiddleware
from xinference.api.errors import install_error_handlers
from xinference.api.gateway.keepalive import KeepAlive
from xinference.api.gateway.routes import RouteTable
from xinference.api.host_guard import HostGuardMiddleware, HostPolicy
from xinference.api.mcp import router as mcp
from xinference.api.mcp.config import McpConfig, load_config
from xinference.api.mcp.manager import McpHub
from xinference.api.mcp_server import http as mcp_server
from xinference.api.metrics import Metrics, RouteLabelMiddleware
from xinference.api.metrics import attach_router as attach_metrics
from xinference.api.openai import embeddings, images, rerank, speech, transcriptions
from xinference.api.openai.chat import router as chat
from xinference.api.openai.chat.serving import GenerationService
from xinference.api.openai.embeddings import EmbeddingService
from xinference.api.openai.image_files import ImageStore
from xinference.api.openai.images import ImagesService
from xinference.api.openai.rerank import RerankService
from xinference.api.openai.responses import router as responses
from xinference.api.openai.responses.serving import ResponsesService
from xinference.api.openai.responses.store import ResponseStore
from xinference.api.openai.speech import SpeechService
from xinference.api.openai.transcriptions import TranscriptionService
from xinference.core.refs import SupervisorRef, supervisor_ref

__all__ = ["ROUTERS", "create_app"]

#: Every route of the API, attached in this order, which is also the order requests are matched in and the order of
#: /openapi.json: each family's ``attach_router``. The engine environments (``/v1/engines/{engine}/install``) come
#: before the engine matrix (``/v1/engines/{model_type}/{model_name}``), which would otherwise take ``install`` for a
#: model name.
ROUTERS: tuple[Callable[[FastAPI], None], ...] = (
    cluster.attach_router,  # health, auth probe, version, workers
    models.attach_router,  # launch, list, describe, scale, terminate
    chat.attach_router,  # OpenAI chat and text completions
    requests.attach_router,  # abort a request by its request_id
    registrations.attach_router,  # custom models
    embeddings.attach_router,  # OpenAI embeddings
    rerank.attach_router,  # Jina / Cohere rerank
    transcriptions.attach_router,  # OpenAI audio transcriptions and translations (speech to text)
    speech.attach_router,  # OpenAI text to speech, a TTS model's voices
    images.attach_router,  # OpenAI image generation and edits, their files, a request's progress
    cache.attach_router,  # downloaded weights
    envs.attach_router,  # engine environments (before the engine matrix)
    engines.attach_router,  # the engine matrix
    logs.attach_router,  # a replica's log (the web UI's Logs page)
    engine_schemas.attach_router,  # launch options as JSON schema (the web UI's launch form)
    chat_templates.attach_router,  # template previews (the web UI's Register page)
    ui.attach_router,  # the web UI's static files
    messages.attach_router,  # Anthropic Messages
    responses.attach_router,  # OpenAI Responses
    operations.attach_router,  # devices, launch history, unload and load by hand
    mcp.attach_router,  # the MCP servers chat requests may use
    attach_metrics,  # GET /metrics
    mcp_server.attach_router,  # the platform's own tools as an MCP server (streamable HTTP)
)


def create_app(
    supervisor_address: str,
    api_keys: frozenset[str] = frozenset(),
    bound_host: str | None = None,
    mcp_config: McpConfig | None = None,
) -> FastAPI:
    """An API bound to the supervisor at ``supervisor_address`` (an xoscar address), served on ``bound_host`` (the
    ``--host`` it listens on; it decides which ``Host`` names are answered, see ``api/host_guard.py``).
    ``mcp_config``: the MCP servers to run (default: the file ``XINFERENCE_MCP_CONFIG`` names, if any)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        supervisor: SupervisorRef = await supervisor_ref(supervisor_address)
        routes = RouteTable(supervisor)
        # Each request is recorded in the metrics when it leaves its admission ticket; models idle past their
        # keep_alive are unloaded.
        routes.admission.sink = app.state.metrics
        routes.keepalive = KeepAlive(supervisor, routes, routes.admission)
        app.state.routes = routes
        app.state.supervisor = supervisor
        # MCP servers: started here, stopped when the API stops (stdio servers with it)
        hub = McpHub(mcp_config if mcp_config is not None else _mcp_config_from_env())
        app.state.mcp = hub
        await hub.start()
        app.state.generation = GenerationService(routes, mcp=hub)
        app.state.models = ModelsService(supervisor, routes, hub.names)
        app.state.registrations = RegistrationsService(supervisor)
        app.state.embeddings = EmbeddingService(routes)
        app.state.rerank = RerankService(routes)
        app.state.transcriptions = TranscriptionService(routes)
        app.state.speech = SpeechService(routes)
        app.state.images = ImagesService(
            routes, app.state.generation.requests, ImageStore(settings.home_dir() / "images")
        )
        # The Anthropic Messages and OpenAI Responses APIs: translated to and from the same engine calls as chat.
        app.state.messages = MessagesService(app.state.generation, routes, mcp_hub=lambda: hub)
        max_items, ttl = settings.responses_store_limits()
        app.state.responses = ResponsesService(
            app.state.generation, ResponseStore(max_items=max_items, ttl=ttl), mcp_hub=lambda: hub
        )
        watcher = asyncio.create_task(routes.watch())
        keepalive = asyncio.create_task(routes.keepalive.watch())
        try:
            async with mcp_server.serve_mcp(app):
                yield
        finally:
            watcher.cancel()
            keepalive.cancel()
            await hub.stop()

    app = FastAPI(title="Xinference", version=__version__, lifespan=lifespan)
    app.state.api_keys = api_keys
    app.state.supervisor_address = supervisor_address
    app.state.metrics = Metrics()
    install_error_handlers(app)
    for attach in ROUTERS:
        attach(app)
    app.add_middleware(RouteLabelMiddleware)
    if api_keys:
        app.add_middleware(ApiKeyMiddleware, keys=api_keys)
    # Added last, so it runs first: a foreign Host is refused before keys, metrics or any route see the request.
    policy = HostPolicy.for_server(bound_host, settings.allowed_hosts())
    app.state.host_policy = policy
    app.add_middleware(HostGuardMiddleware, policy=policy)
    return app


def _mcp_config_from_env() -> McpConfig:
    path = settings.mcp_config_path()
    return load_config(path) if path is not None else McpConfig()
