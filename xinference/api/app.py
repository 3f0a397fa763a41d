"""The FastAPI application: state, error handlers, middleware and routers, built by one factory."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from fastapi import FastAPI

from xinference import __version__, settings
from xinference.api.auth import ApiKeyMiddleware
from xinference.api.errors import install_error_handlers
from xinference.api.gateway.keepalive import KeepAlive
from xinference.api.gateway.routes import RouteTable
from xinference.api.host_guard import HostGuardMiddleware, HostPolicy
from xinference.api.metrics import Metrics, RouteLabelMiddleware
from xinference.api.metrics import attach_router as attach_metrics
from xinference.api.routers import (
    cache,
    chat_templates,
    cluster,
    embeddings,
    engine_envs,
    engine_schemas,
    engines,
    generation,
    logs,
    messages,
    models,
    operations,
    registrations,
    rerank,
    responses,
    ui,
)
from xinference.api.serving.embeddings import EmbeddingService
from xinference.api.serving.generation import GenerationService
from xinference.api.serving.messages import MessagesService
from xinference.api.serving.models import ModelsService
from xinference.api.serving.registrations import RegistrationsService
from xinference.api.serving.rerank import RerankService
from xinference.api.serving.response_store import ResponseStore
from xinference.api.serving.responses import ResponsesService
from xinference.core.refs import SupervisorRef, supervisor_ref

__all__ = ["create_app"]


def create_app(
    supervisor_address: str, api_keys: frozenset[str] = frozenset(), bound_host: str | None = None
) -> FastAPI:
    """An API bound to the supervisor at ``supervisor_address`` (an xoscar address), served on ``bound_host`` (the
    ``--host`` it listens on; it decides which ``Host`` names are answered, see ``api/host_guard.py``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        supervisor: SupervisorRef = await supervisor_ref(supervisor_address)
        routes = RouteTable(supervisor)
        # Operations (issue 12): per-request metrics recorded as admission tickets are left; idle unload.
        routes.admission.sink = app.state.metrics
        routes.keepalive = KeepAlive(supervisor, routes, routes.admission)
        app.state.routes = routes
        app.state.supervisor = supervisor
        app.state.generation = GenerationService(routes)
        app.state.models = ModelsService(supervisor, routes)
        app.state.registrations = RegistrationsService(supervisor)
        app.state.embeddings = EmbeddingService(routes)
        app.state.rerank = RerankService(routes)
        # The agent APIs (issue 10): translated to and from the same engine calls as chat.
        app.state.messages = MessagesService(app.state.generation, routes)
        max_items, ttl = settings.responses_store_limits()
        app.state.responses = ResponsesService(app.state.generation, ResponseStore(max_items=max_items, ttl=ttl))
        watcher = asyncio.create_task(routes.watch())
        keepalive = asyncio.create_task(routes.keepalive.watch())
        try:
            yield
        finally:
            watcher.cancel()
            keepalive.cancel()

    app = FastAPI(title="Xinference", version=__version__, lifespan=lifespan)
    app.state.api_keys = api_keys
    app.state.supervisor_address = supervisor_address
    app.state.metrics = Metrics()
    install_error_handlers(app)
    for module in (cluster, models, generation, registrations, embeddings, rerank, cache, engine_envs, engines):
        module.attach_router(app)
    for extra in (logs, engine_schemas, chat_templates, ui):  # the web UI and what its pages need (issue 11)
        extra.attach_router(app)
    for agent_api in (messages, responses):  # Anthropic Messages and OpenAI Responses (issue 10)
        agent_api.attach_router(app)
    operations.attach_router(app)  # devices, launch history, unload/load (issue 12)
    attach_metrics(app)  # GET /metrics
    app.add_middleware(RouteLabelMiddleware)
    if api_keys:
        app.add_middleware(ApiKeyMiddleware, keys=api_keys)
    # Added last, so it runs first: a foreign Host is refused before keys, metrics or any route see the request.
    policy = HostPolicy.for_server(bound_host, settings.allowed_hosts())
    app.state.host_policy = policy
    app.add_middleware(HostGuardMiddleware, policy=policy)
    return app
