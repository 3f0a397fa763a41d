"""What ``POST /v1/rerank`` does: check the model can rerank, then one call to its model actor (which batches)."""

from __future__ import annotations

from typing import Any

from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import RouteTable
from xinference.api.protocol.rerank import RerankRequest
from xinference.api.serving.embeddings import check_model_type

__all__ = ["RerankService"]


class RerankService:
    """Runs rerank requests against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes

    async def create(self, body: RerankRequest) -> dict[str, Any]:
        route = await self._routes.get(body.model)
        check_model_type(route, "rerank", "rerank", "rerank requests")
        params = body.to_engine_params()
        note_keep_alive(self._routes, route, body.keep_alive)
        result, _ = await self._routes.call(route, lambda replica: replica.ref.rerank(params))
        return result
