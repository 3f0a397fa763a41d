"""What the model-management routes do: launch, list, describe, terminate (through the supervisor).

Listed and described models keep OpenAI's list shape (``{"object": "list", "data": [{"id", "object", "created",
"owned_by", ...}]}``) plus the original Xinference fields, and say what a client needs to use them (see
:func:`model_entry`): the context the running model serves, its abilities, its engine and its status.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any, Callable

from xinference.api.admin.models.protocol import AddReplicasRequest, LaunchModelRequest
from xinference.api.gateway.routes import RouteTable
from xinference.core.refs import SupervisorRef
from xinference.engines.memory import CONTEXT_OPTIONS
from xinference.errors import InvalidRequest, McpServerNotFound

__all__ = ["ModelsService", "instance_entry", "model_entry"]

#: Xinference's instance statuses (``LaunchStatus`` names) for this platform's model statuses
_INSTANCE_STATUS = {
    "launching": "CREATING",
    "ready": "READY",
    "degraded": "READY",
    "unavailable": "ERROR",
    "failed": "ERROR",
    "unloading": "TERMINATING",
    "unloaded": "TERMINATED",
}

logger = logging.getLogger(__name__)


class ModelsService:
    """Control-plane operations; each one is a call to the supervisor plus a route-cache update."""

    def __init__(
        self, supervisor: SupervisorRef, routes: RouteTable, mcp_servers: Callable[[], list[str]] | None = None
    ) -> None:
        self._supervisor = supervisor
        self._routes = routes
        #: the names of the MCP servers this API process runs (a launch's ``mcp_servers`` must name them)
        self._mcp_servers = mcp_servers

    async def launch(self, body: LaunchModelRequest, wait_ready: bool = True) -> dict[str, Any]:
        """Launch; with ``wait_ready=False`` the decisions (and their 4xx) still happen now, and the call returns
        as soon as the model is reserved: follow it with ``/progress`` and ``/events``."""
        if isinstance(body.mcp_servers, list) and self._mcp_servers is not None:
            known = self._mcp_servers()
            for name in body.mcp_servers:
                if name not in known:
                    raise McpServerNotFound(
                        f"no MCP server named {name!r} (configured: {', '.join(known) or 'none'})", param="mcp_servers"
                    )
        info: dict[str, Any] = await self._supervisor.launch_model(body.to_launch(), wait_ready)
        self._routes.invalidate()
        return {"model_uid": info["model_uid"], "model_engine": info["model_engine"], "status": info["status"]}

    async def list(self) -> dict[str, Any]:
        data = [model_entry(info) for info in await self._supervisor.list_models()]
        for entry in data:  # through this API process (the web UI's Running page shows it)
            entry["requests_in_flight"] = self._routes.in_flight(entry["model_uid"])
        return {"object": "list", "data": data}

    async def instances(self, model_name: str | None, model_uid: str | None) -> builtins.list[dict[str, Any]]:
        """Xinference's ``GET /v1/models/instances``: one record per model (filtered by name and/or uid), sorted by
        uid; see :func:`instance_entry`."""
        infos = await self._supervisor.list_models()
        chosen = [
            info
            for info in infos
            if (model_name is None or info.get("model_name") == model_name)
            and (model_uid is None or info.get("model_uid") == model_uid)
        ]
        return [instance_entry(info) for info in sorted(chosen, key=lambda info: str(info.get("model_uid")))]

    async def describe(self, model_uid: str) -> dict[str, Any]:
        return model_entry(await self._supervisor.describe_model(model_uid))

    async def progress(self, model_uid: str) -> dict[str, Any]:
        """``{"progress": 0.0-1.0}`` of a launch (the weights' download, per replica; 1.0 once ready), plus what
        it is doing now: ``status``, ``stage``, ``done_bytes``/``total_bytes``, ``bytes_per_second``,
        ``eta_seconds``, ``replica_uid`` and ``replicas_ready``/``replicas_wanted`` (the web UI shows them)."""
        status: dict[str, Any] = await self._supervisor.launch_status(model_uid)  # one call carries the progress
        return status

    async def cancel(self, model_uid: str) -> None:
        await self._supervisor.cancel_launch(model_uid)

    async def events(self, model_uid: str) -> dict[str, Any]:
        """What happened to the model: launch, replicas lost, died, restarted, adopted (oldest first)."""
        return {"model_uid": model_uid, "events": await self._supervisor.model_events(model_uid)}

    async def add_replicas(self, model_uid: str, body: AddReplicasRequest) -> dict[str, Any]:
        """Start ``body.replica`` more replicas. Placement names the worker it cannot find ``worker_ip``, a field
        of launches; here the worker comes from ``replica_config``, so the error names that field instead."""
        worker_ip = body.worker_ip()
        try:
            result: dict[str, Any] = await self._supervisor.add_replicas(model_uid, body.replica, body.n_gpu, worker_ip)
        except InvalidRequest as exc:
            if exc.param != "worker_ip":
                raise
            raise type(exc)(exc.message, param="replica_config") from None
        self._routes.invalidate()
        return result

    async def remove_replica(self, model_uid: str, replica_id: int) -> dict[str, Any]:
        remaining = await self._supervisor.remove_replica(model_uid, replica_id)
        self._routes.invalidate()
        return {"model_uid": model_uid, "remaining_replicas": remaining}

    async def terminate(self, model_uid: str) -> None:
        await self._supervisor.terminate_model(model_uid)
        self._routes.invalidate()


def model_entry(info: dict[str, Any]) -> dict[str, Any]:
    """A supervisor record as listed, with what clients size and pick models by.

    - ``context_length``: the tokens one request may use on the running model (prompt + completion): the engine's
      resolved context (``n_ctx``, per slot when llama.cpp's KV cache is not unified; ``max_model_len``;
      ``context_length``), else the model's own. ``model_context_length`` is the model's own maximum.
    - ``abilities``: ``model_ability`` plus ``tools`` when the family declares a tool-call format and ``reasoning``
      when it declares reasoning tags (what the platform can parse for it).
    - ``engine`` and ``status`` repeat ``model_engine`` and the launch status under the short names.
    """
    entry = dict(info)
    model_context = info.get("context_length")
    config = info.get("engine_config") or {}
    served = next((config[k] for k in CONTEXT_OPTIONS if isinstance(config.get(k), int) and config[k] > 0), None)
    if served is not None and config.get("kv_unified") is False and isinstance(config.get("n_parallel"), int):
        served //= max(1, config["n_parallel"])
    entry["model_context_length"] = model_context
    entry["context_length"] = served or model_context
    abilities = list(info.get("model_ability") or [])
    for ability, declared in (("tools", info.get("tool_call_format")), ("reasoning", info.get("reasoning_tags"))):
        if declared and ability not in abilities:
            abilities.append(ability)
    entry["abilities"] = abilities
    entry["engine"] = info.get("model_engine")
    entry["status"] = info.get("status")
    return entry


def instance_entry(info: dict[str, Any]) -> dict[str, Any]:
    """A supervisor record in Xinference's ``InstanceInfo`` shape: ``model_name``, ``model_uid``,
    ``model_version``, ``model_ability``, ``replica``, ``status`` (``CREATING``, ``READY``, ``ERROR``,
    ``TERMINATING``, ``TERMINATED``; this platform's own status is ``model_status``), ``instance_created_ts``,
    ``n_worker`` and ``replica_statuses`` (one per running replica)."""
    status = str(info.get("status"))
    created = int(info.get("created") or 0)
    replicas: list[dict[str, Any]] = []
    for replica in info.get("replicas") or []:
        replica_uid = str(replica.get("replica_uid"))
        index = replica_uid.rsplit("-", 1)[-1]
        replicas.append(
            {
                "replica_id": int(index) if index.isdigit() else len(replicas),
                "replica_model_uid": replica_uid,
                "worker_address": replica.get("worker_address"),
                "status": "READY",
                "model_state": "ready",
                "created_ts": created,
                "error_message": None,
                "replica_uid": replica_uid,
                "gpu_idx": replica.get("gpu_indices") or None,
            }
        )
    return {
        "model_name": info.get("model_name"),
        "model_uid": info.get("model_uid"),
        "model_version": None,
        "model_ability": list(info.get("model_ability") or []),
        "replica": info.get("replica"),
        "status": _INSTANCE_STATUS.get(status, status.upper()),
        "model_status": status,
        "instance_created_ts": created,
        "n_worker": 1,
        "replica_statuses": replicas,
    }
