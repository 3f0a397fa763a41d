"""Every request the client makes, written once: what to send and how to read the answer.

Each function in this package returns a :class:`Call` (method, path, body, how to read the JSON answer) and sends
nothing; the synchronous and the asynchronous client run the same calls through their own transport
(:mod:`xinference.client.transport`), so the two never drift apart. A function's signature is the public method's
signature: the clients expose it unchanged (handles pass their model uid first).

Names, parameters and return shapes follow Xinference's own client (``xinference_client``); what this platform
adds (engine environments, logs, unload/load, devices, metrics, launch history, OpenAI-style calls by uid) has
names that do not clash with them.

The calls are grouped by family: :mod:`.admin` (cluster, models, registrations, engines, cache, operations),
:mod:`.generation` (OpenAI's routes by uid), :mod:`.handles` (Xinference's model handles: chat, embeddings, rerank,
audio) and :mod:`.images`; this package re-exports them all, so ``calls.launch_model(...)`` reads the same everywhere.
"""

from __future__ import annotations

from xinference.client.calls.admin import (
    abort_request,
    add_model_replica,
    cancel_launch_model,
    cluster_auth,
    describe_model,
    engine_install_status,
    get_cluster_info,
    get_cluster_version,
    get_instance_info,
    get_launch_history,
    get_launch_model_progress,
    get_metrics,
    get_model_events,
    get_model_logs,
    get_model_registration,
    get_supervisor_info,
    get_workers_info,
    install_engine,
    launch_model,
    list_cached_models,
    list_devices,
    list_engines,
    list_model_registrations,
    list_models,
    load_model,
    query_engine_by_model_name,
    register_model,
    remove_cached_model,
    status,
    terminate_model,
    terminate_model_replica,
    uninstall_engine,
    unload_model,
    unregister_model,
)
from xinference.client.calls.base import Call, Message, NGpu
from xinference.client.calls.generation import (
    chat_completion,
    completions,
    embeddings,
    rerank,
)
from xinference.client.calls.handles import (
    handle_chat,
    handle_create_embedding,
    handle_generate,
    handle_kind,
    handle_rerank,
    handle_speech,
    handle_transcriptions,
    handle_translations,
    handle_voices,
    legacy_messages,
    xinference_chunk,
)
from xinference.client.calls.images import (
    get_progress,
    handle_image_to_image,
    handle_inpainting,
    handle_text_to_image,
)

__all__ = [
    "Call",
    "Message",
    "NGpu",
    "abort_request",
    "add_model_replica",
    "cancel_launch_model",
    "chat_completion",
    "cluster_auth",
    "completions",
    "describe_model",
    "embeddings",
    "engine_install_status",
    "get_cluster_info",
    "get_cluster_version",
    "get_instance_info",
    "get_launch_history",
    "get_launch_model_progress",
    "get_metrics",
    "get_model_events",
    "get_model_logs",
    "get_model_registration",
    "get_progress",
    "get_supervisor_info",
    "get_workers_info",
    "handle_chat",
    "handle_create_embedding",
    "handle_generate",
    "handle_image_to_image",
    "handle_inpainting",
    "handle_kind",
    "handle_rerank",
    "handle_speech",
    "handle_text_to_image",
    "handle_transcriptions",
    "handle_translations",
    "handle_voices",
    "install_engine",
    "launch_model",
    "legacy_messages",
    "list_cached_models",
    "list_devices",
    "list_engines",
    "list_model_registrations",
    "list_models",
    "load_model",
    "query_engine_by_model_name",
    "register_model",
    "remove_cached_model",
    "rerank",
    "status",
    "terminate_model",
    "terminate_model_replica",
    "uninstall_engine",
    "unload_model",
    "unregister_model",
    "xinference_chunk",
]
