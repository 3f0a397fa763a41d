"""What ``POST /v1/embeddings`` does: check the model can embed, then one call to its model actor.

The engine batches concurrent requests itself, so this layer adds no queueing; it only picks the least busy replica.
"""

from __future__ import annotations

from typing import Any

from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.routes import Route, RouteTable
from xinference.api.protocol.embeddings import EmbeddingRequest
from xinference.errors import WrongModelType

__all__ = ["EmbeddingService", "check_model_type"]


def check_model_type(route: Route, model_type: str, ability: str, what: str) -> None:
    """WrongModelType (400) naming the model's type and the operation when ``route`` cannot do ``what``."""
    if route.model_type != model_type or ability not in route.model_ability:
        raise WrongModelType(
            f"model {route.model_uid!r} is a {route.model_type} model with abilities "
            f"{', '.join(route.model_ability)}; it cannot serve {what} (that needs a {model_type} model)",
            param="model",
        )


class EmbeddingService:
    """Runs embedding requests against the model actors found through the route table."""

    def __init__(self, routes: RouteTable) -> None:
        self._routes = routes

    async def create(self, body: EmbeddingRequest) -> dict[str, Any]:
        route = await self._routes.get(body.model)
        check_model_type(route, "embedding", "embed", "embeddings")
        params = body.to_engine_params()
        note_keep_alive(self._routes, route, body.keep_alive)
        result, _ = await self._routes.call(route, lambda replica: replica.ref.embed(params))
        return result
