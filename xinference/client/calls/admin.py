"""Calls on the platform itself: the cluster, models and replicas, registrations, engines, the model cache and
operations (logs, unload/load, launch history, devices, metrics)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from xinference.client.calls.base import Call, NGpu, as_dict, as_list, nothing, present, quoted, unchanged


# -- cluster ----------------------------------------------------------------------------------------------------------
def status() -> Call[dict[str, Any]]:
    """The server's health answer (``{"status": "ok"}``)."""
    return Call("GET", "/status", as_dict)


def cluster_auth() -> Call[bool]:
    """Whether the server wants an API key (``GET /v1/cluster/auth``)."""
    return Call("GET", "/v1/cluster/auth", lambda body: bool(as_dict(body).get("auth")))


def get_cluster_version() -> Call[dict[str, Any]]:
    """``{"version": ...}`` of the server."""
    return Call("GET", "/v1/cluster/version", as_dict)


def get_cluster_info() -> Call[dict[str, Any]]:
    """The cluster as the supervisor sees it: workers, their hardware and devices, models."""
    return Call("GET", "/v1/cluster/info", as_dict)


def get_workers_info() -> Call[list[dict[str, Any]]]:
    """One entry per worker: its address, hardware, and seconds since its last heartbeat."""
    return Call("GET", "/v1/workers", as_list)


def get_supervisor_info() -> Call[dict[str, Any]]:
    """``{"supervisor_ip": address}``: the supervisor's internal address (Xinference's shape)."""
    return Call("GET", "/v1/supervisor", as_dict)


# -- models -----------------------------------------------------------------------------------------------------------
def list_models() -> Call[dict[str, dict[str, Any]]]:
    """Every model the cluster runs, keyed by uid: ``model_name``, ``model_type``, ``model_ability``,
    ``context_length``, ``replica``, ``model_engine``, ``status``, ..."""

    def by_uid(body: Any) -> dict[str, dict[str, Any]]:
        entries = as_dict(body).get("data") or []
        return {entry["id"]: entry for entry in entries}

    return Call("GET", "/v1/models", by_uid)


def launch_model(
    model_name: str,
    model_type: str = "LLM",
    model_engine: str | None = None,
    model_uid: str | None = None,
    model_size_in_billions: int | float | str | None = None,
    model_format: str | None = None,
    quantization: str | None = None,
    replica: int = 1,
    n_worker: int = 1,
    n_gpu: NGpu | str = "auto",
    peft_model_config: dict[str, Any] | None = None,
    request_limits: int | None = None,
    worker_ip: str | None = None,
    gpu_idx: int | list[int] | None = None,
    replica_config: list[dict[str, Any]] | None = None,
    model_path: str | None = None,
    enable_thinking: bool | None = None,
    enable_virtual_env: bool | None = None,
    virtual_env_packages: list[str] | None = None,
    envs: dict[str, str] | None = None,
    virtual_env_find_links: list[str] | None = None,
    **kwargs: Any,
) -> Call[str]:
    """Launch a model and return its uid once it serves (``wait_ready=False``: as soon as it is reserved; follow
    it with :func:`get_launch_model_progress`). Other keyword arguments are the engine's own launch options
    (``n_ctx=4096``), which the engine validates; a feature this platform does not have is refused naming it."""
    if isinstance(model_size_in_billions, float):  # the API takes an int or a string such as "0_5"
        size = model_size_in_billions
        model_size_in_billions = int(size) if size.is_integer() else str(size).replace(".", "_")
    wait_ready = kwargs.pop("wait_ready", True)
    payload: dict[str, Any] = {
        "model_name": model_name,
        "model_type": model_type,
        "replica": replica,
        "n_gpu": n_gpu,
        **present(
            model_engine=model_engine,
            model_uid=model_uid,
            model_size_in_billions=model_size_in_billions,
            model_format=model_format,
            quantization=quantization,
            n_worker=None if n_worker == 1 else n_worker,
            peft_model_config=peft_model_config,
            request_limits=request_limits,
            worker_ip=worker_ip,
            gpu_idx=gpu_idx,
            replica_config=replica_config,
            model_path=model_path,
            enable_thinking=enable_thinking,
            enable_virtual_env=enable_virtual_env,
            virtual_env_packages=virtual_env_packages,
            envs=envs,
            virtual_env_find_links=virtual_env_find_links,
        ),
        **kwargs,
    }
    params = None if wait_ready else {"wait_ready": "false"}
    return Call(
        "POST", "/v1/models", lambda body: str(body["model_uid"]), json=payload, params=params, unbounded_read=True
    )


def describe_model(model_uid: str) -> Call[dict[str, Any]]:
    """One running model's description (the fields of :func:`list_models`); 404 when there is no such uid."""
    return Call("GET", f"/v1/models/{quoted(model_uid)}", as_dict)


def terminate_model(model_uid: str) -> Call[None]:
    """Stop every replica of a model; 404 when there is no such uid."""
    return Call("DELETE", f"/v1/models/{quoted(model_uid)}", nothing)


def get_launch_model_progress(model_uid: str) -> Call[dict[str, Any]]:
    """``{"progress": 0.0-1.0, ...}`` of a model being launched (its weights' download); 1.0 once ready."""
    return Call("GET", f"/v1/models/{quoted(model_uid)}/progress", as_dict)


def cancel_launch_model(model_uid: str) -> Call[None]:
    """Stop a launch in progress; the pending ``launch_model`` call then fails with "... was cancelled"."""
    return Call("POST", f"/v1/models/{quoted(model_uid)}/cancel", nothing)


def get_instance_info(model_name: str | None = None, model_uid: str | None = None) -> Call[list[dict[str, Any]]]:
    """Xinference's instance records (``model_name``, ``model_uid``, ``status`` such as ``READY``, ``replica``,
    ``replica_statuses``...), sorted by uid, filtered by name and/or uid."""
    return Call("GET", "/v1/models/instances", as_list, params=present(model_name=model_name, model_uid=model_uid))


def get_model_events(model_uid: str) -> Call[list[dict[str, Any]]]:
    """What happened to a model (launch, replicas lost, restarted...), oldest first."""
    return Call("GET", f"/v1/models/{quoted(model_uid)}/events", lambda body: as_dict(body).get("events") or [])


def add_model_replica(
    model_uid: str,
    replica_config: dict[str, Any] | list[dict[str, Any]] | None = None,
    replica: int = 1,
    model_engine: str | None = None,
    n_gpu: int | str | None = None,
) -> Call[dict[str, Any]]:
    """Start more replicas of a running model (``replica_config`` names the worker of each, Xinference's shape)."""
    payload: dict[str, Any] = present(replica_config=replica_config, model_engine=model_engine, n_gpu=n_gpu)
    if replica != 1:
        payload["replica"] = replica
    return Call("POST", f"/v1/models/{quoted(model_uid)}/replicas", as_dict, json=payload)


def terminate_model_replica(model_uid: str, replica_id: int) -> Call[int]:
    """Stop one replica of a model; returns how many remain."""
    return Call(
        "DELETE",
        f"/v1/models/{quoted(model_uid)}/replicas/{replica_id}",
        lambda body: int(body["remaining_replicas"]),
    )


def abort_request(model_uid: str, request_id: str, block_duration: int = 30) -> Call[dict[str, Any]]:
    """Abort the request sent with ``request_id`` (chat or completion: ``generate_config={"request_id": ...}``).

    ``{"msg": "DONE"}`` when a running request was aborted; ``{"msg": "NOT_FOUND"}`` when none runs under that id.
    Either way the id stays refused for ``block_duration`` seconds, so a request that arrives after its abort (a
    race between the two) is refused too.
    """
    return Call(
        "POST",
        f"/v1/models/{quoted(model_uid)}/requests/{quote(request_id, safe='')}/abort",
        as_dict,
        json={"block_duration": block_duration},
    )


# -- registrations ----------------------------------------------------------------------------------------------------
def register_model(
    model_type: str, model: str | dict[str, Any], persist: bool = False, worker_ip: str | None = None
) -> Call[dict[str, Any]]:
    """Register a custom model family (its JSON text, or a dict)."""
    text = model if isinstance(model, str) else json.dumps(model)
    body = {"model": text, "persist": persist, **present(worker_ip=worker_ip)}
    return Call("POST", f"/v1/model_registrations/{quoted(model_type)}", as_dict, json=body)


def unregister_model(model_type: str, model_name: str) -> Call[dict[str, Any]]:
    """Remove a custom model family."""
    return Call("DELETE", f"/v1/model_registrations/{quoted(model_type)}/{quoted(model_name)}", as_dict)


def list_model_registrations(model_type: str, detailed: bool = False) -> Call[list[dict[str, Any]]]:
    """Every family of ``model_type`` (built-in and custom): name, built-in or not; ``detailed`` adds the specs."""
    params = {"detailed": "true" if detailed else "false"}
    return Call("GET", f"/v1/model_registrations/{quoted(model_type)}", as_list, params=params)


def get_model_registration(model_type: str, model_name: str) -> Call[dict[str, Any]]:
    """One family as registered: its specs, abilities, context length, template..."""
    return Call("GET", f"/v1/model_registrations/{quoted(model_type)}/{quoted(model_name)}", as_dict)


# -- engines ----------------------------------------------------------------------------------------------------------
def query_engine_by_model_name(
    model_name: str, model_type: str | None = "LLM", enable_virtual_env: bool | None = None
) -> Call[dict[str, Any]]:
    """Every engine's verdict on a model over the cluster: ``{engine: [accepted params...] | "reason"}``.
    (``enable_virtual_env`` is Xinference's; engine environments here are installed with :func:`install_engine`.)"""
    path = f"/v1/engines/{quoted(model_name)}"
    if model_type:
        path = f"/v1/engines/{quoted(model_type)}/{quoted(model_name)}"
    params = None if enable_virtual_env is None else {"enable_virtual_env": str(enable_virtual_env).lower()}
    return Call("GET", path, as_dict, params=params)


def list_engines() -> Call[dict[str, dict[str, str]]]:
    """Every engine's availability per worker: ``{engine: {worker: "" | "why not"}}``."""
    return Call("GET", "/v1/engines", unchanged)


def install_engine(
    engine: str, worker_ip: str | None = None, force: bool = False, wait: bool = False
) -> Call[dict[str, Any]]:
    """Start installing ``engine``'s environment on the workers (``wait``: return when it has ended)."""
    body = {"worker_ip": worker_ip, "force": force, "wait": wait}
    return Call("POST", f"/v1/engines/{quoted(engine)}/install", as_dict, json=body, unbounded_read=wait)


def engine_install_status(engine: str, worker_ip: str | None = None) -> Call[dict[str, Any]]:
    """Where an engine environment's install stands on each worker (stage, pip's last lines)."""
    return Call("GET", f"/v1/engines/{quoted(engine)}/install", as_dict, params=present(worker_ip=worker_ip))


def uninstall_engine(engine: str, worker_ip: str | None = None) -> Call[dict[str, Any]]:
    """Remove an engine environment from the workers."""
    return Call("POST", f"/v1/engines/{quoted(engine)}/uninstall", as_dict, params=present(worker_ip=worker_ip))


# -- model cache ------------------------------------------------------------------------------------------------------
def list_cached_models(model_name: str | None = None, worker_ip: str | None = None) -> Call[list[dict[str, Any]]]:
    """Downloaded weights on the workers: one entry per repository revision (id, hub, repo, files, size)."""
    return Call(
        "GET",
        "/v1/cache/models",
        lambda body: as_dict(body).get("list") or [],
        params=present(model_name=model_name, worker_ip=worker_ip),
    )


def remove_cached_model(
    entry: str | None = None, model_name: str | None = None, worker_ip: str | None = None
) -> Call[list[dict[str, Any]]]:
    """Delete one cache entry (by id) or every entry of ``model_name``; returns what was removed."""
    return Call(
        "DELETE",
        "/v1/cache/models",
        lambda body: as_dict(body).get("removed") or [],
        params=present(entry=entry, model_name=model_name, worker_ip=worker_ip),
    )


# -- operations: a replica's log, unload/load by hand, launch history, devices, metrics --------------------------------
def get_model_logs(
    model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
) -> Call[dict[str, Any]]:
    """A bounded piece of a replica's log (``lines``, ``offset`` to pass back as ``since`` to follow it)."""
    params = {"tail": tail, **present(replica=replica, since=since)}
    return Call("GET", f"/v1/models/{quoted(model_uid)}/logs", as_dict, params=params)


def unload_model(model_uid: str) -> Call[dict[str, Any]]:
    """End a model's processes now; it stays listed as ``unloaded`` and loads again on its next request."""
    return Call("POST", f"/v1/models/{quoted(model_uid)}/unload", as_dict)


def load_model(model_uid: str) -> Call[dict[str, Any]]:
    """Load an unloaded model again; returns once it serves."""
    return Call("POST", f"/v1/models/{quoted(model_uid)}/load", as_dict, unbounded_read=True)


def get_launch_history() -> Call[list[dict[str, Any]]]:
    """Launches that reached ready, newest first, with their request and whether they autostart."""
    return Call("GET", "/v1/launch_history", as_list)


def list_devices() -> Call[list[dict[str, Any]]]:
    """Every worker's GPUs: index, name, memory total/used and the replicas holding each."""
    return Call("GET", "/v1/cluster/devices", as_list)


def get_metrics() -> Call[str]:
    """The Prometheus text of ``GET /metrics``."""
    return Call("GET", "/metrics", str, text=True)
