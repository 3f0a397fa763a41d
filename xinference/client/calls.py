"""Every request the client makes, written once: what to send and how to read the answer.

Each function here returns a :class:`Call` (method, path, body, how to read the JSON answer) and sends nothing;
the synchronous and the asynchronous client run the same calls through their own transport
(:mod:`xinference.client.transport`), so the two never drift apart. A function's signature is the public method's
signature: the clients expose it unchanged (handles pass their model uid first).

Names, parameters and return shapes follow Xinference's own client (``xinference_client``); what this platform
adds (engine environments, logs, unload/load, devices, metrics, launch history, OpenAI-style calls by uid) has
names that do not clash with them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Literal, TypeVar, Union
from urllib.parse import quote

__all__ = ["Call", "Message", "NGpu"]

T = TypeVar("T")

#: One chat message, OpenAI style: ``{"role": "user", "content": "Hi"}``.
Message = Mapping[str, Any]
#: How many GPUs a model gets: ``"auto"``, ``None`` (CPU only) or a count.
NGpu = Union[int, Literal["auto"], None]


def _same(body: Any) -> Any:
    return body


def _nothing(body: Any) -> None:
    return None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    ``parse`` turns the decoded JSON (the text, with ``text=True``) into the method's result. ``stream``: the
    answer is server-sent events, read chunk by chunk (``parse`` is then unused). ``unbounded_read``: the server
    may take as long as it needs (a launch downloads weights), so no read timeout applies.
    """

    method: str
    path: str
    parse: Callable[[Any], T] = field(default=_same)
    json: Any = None
    params: Mapping[str, Any] | None = None
    stream: bool = False
    unbounded_read: bool = False
    text: bool = False
    each: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: a multipart form: its fields (``data``) and files (``files``, httpx's ``[(field, (name, bytes, type))]``)
    data: Mapping[str, Any] | None = None
    files: Sequence[tuple[str, tuple[str, bytes, str]]] | None = None
    #: the answer is bytes (audio), given to ``parse`` as they are; streamed: an iterator of byte chunks
    binary: bool = False


def _uid(model_uid: str) -> str:
    """A model uid as one path segment (a uid is user-chosen: ``/`` or ``?`` must not change the route)."""
    return quote(model_uid, safe="")


def _some(**values: Any) -> dict[str, Any]:
    """The values that are not None (query parameters and optional body fields)."""
    return {k: v for k, v in values.items() if v is not None}


def _dict(body: Any) -> dict[str, Any]:
    return body if isinstance(body, dict) else {}


def _list(body: Any) -> list[dict[str, Any]]:
    return body if isinstance(body, list) else []


# -- cluster ----------------------------------------------------------------------------------------------------------
def status() -> Call[dict[str, Any]]:
    """The server's health answer (``{"status": "ok"}``)."""
    return Call("GET", "/status", _dict)


def cluster_auth() -> Call[bool]:
    """Whether the server wants an API key (``GET /v1/cluster/auth``)."""
    return Call("GET", "/v1/cluster/auth", lambda body: bool(_dict(body).get("auth")))


def get_cluster_version() -> Call[dict[str, Any]]:
    """``{"version": ...}`` of the server."""
    return Call("GET", "/v1/cluster/version", _dict)


def get_cluster_info() -> Call[dict[str, Any]]:
    """The cluster as the supervisor sees it: workers, their hardware and devices, models."""
    return Call("GET", "/v1/cluster/info", _dict)


def get_workers_info() -> Call[list[dict[str, Any]]]:
    """One entry per worker: its address, hardware, and seconds since its last heartbeat."""
    return Call("GET", "/v1/workers", _list)


def get_supervisor_info() -> Call[dict[str, Any]]:
    """``{"supervisor_ip": address}``: the supervisor's internal address (Xinference's shape)."""
    return Call("GET", "/v1/supervisor", _dict)


# -- models -----------------------------------------------------------------------------------------------------------
def list_models() -> Call[dict[str, dict[str, Any]]]:
    """Every model the cluster runs, keyed by uid: ``model_name``, ``model_type``, ``model_ability``,
    ``context_length``, ``replica``, ``model_engine``, ``status``, ..."""

    def by_uid(body: Any) -> dict[str, dict[str, Any]]:
        entries = _dict(body).get("data") or []
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
        **_some(
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
    return Call("GET", f"/v1/models/{_uid(model_uid)}", _dict)


def terminate_model(model_uid: str) -> Call[None]:
    """Stop every replica of a model; 404 when there is no such uid."""
    return Call("DELETE", f"/v1/models/{_uid(model_uid)}", _nothing)


def get_launch_model_progress(model_uid: str) -> Call[dict[str, Any]]:
    """``{"progress": 0.0-1.0, ...}`` of a model being launched (its weights' download); 1.0 once ready."""
    return Call("GET", f"/v1/models/{_uid(model_uid)}/progress", _dict)


def cancel_launch_model(model_uid: str) -> Call[None]:
    """Stop a launch in progress; the pending ``launch_model`` call then fails with "... was cancelled"."""
    return Call("POST", f"/v1/models/{_uid(model_uid)}/cancel", _nothing)


def get_instance_info(model_name: str | None = None, model_uid: str | None = None) -> Call[list[dict[str, Any]]]:
    """Xinference's instance records (``model_name``, ``model_uid``, ``status`` such as ``READY``, ``replica``,
    ``replica_statuses``...), sorted by uid, filtered by name and/or uid."""
    return Call("GET", "/v1/models/instances", _list, params=_some(model_name=model_name, model_uid=model_uid))


def get_model_events(model_uid: str) -> Call[list[dict[str, Any]]]:
    """What happened to a model (launch, replicas lost, restarted...), oldest first."""
    return Call("GET", f"/v1/models/{_uid(model_uid)}/events", lambda body: _dict(body).get("events") or [])


def add_model_replica(
    model_uid: str,
    replica_config: dict[str, Any] | list[dict[str, Any]] | None = None,
    replica: int = 1,
    model_engine: str | None = None,
    n_gpu: int | str | None = None,
) -> Call[dict[str, Any]]:
    """Start more replicas of a running model (``replica_config`` names the worker of each, Xinference's shape)."""
    payload: dict[str, Any] = _some(replica_config=replica_config, model_engine=model_engine, n_gpu=n_gpu)
    if replica != 1:
        payload["replica"] = replica
    return Call("POST", f"/v1/models/{_uid(model_uid)}/replicas", _dict, json=payload)


def terminate_model_replica(model_uid: str, replica_id: int) -> Call[int]:
    """Stop one replica of a model; returns how many remain."""
    return Call(
        "DELETE",
        f"/v1/models/{_uid(model_uid)}/replicas/{replica_id}",
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
        f"/v1/models/{_uid(model_uid)}/requests/{quote(request_id, safe='')}/abort",
        _dict,
        json={"block_duration": block_duration},
    )


# -- registrations ----------------------------------------------------------------------------------------------------
def register_model(
    model_type: str, model: str | dict[str, Any], persist: bool = False, worker_ip: str | None = None
) -> Call[dict[str, Any]]:
    """Register a custom model family (its JSON text, or a dict)."""
    text = model if isinstance(model, str) else json.dumps(model)
    body = {"model": text, "persist": persist, **_some(worker_ip=worker_ip)}
    return Call("POST", f"/v1/model_registrations/{_uid(model_type)}", _dict, json=body)


def unregister_model(model_type: str, model_name: str) -> Call[dict[str, Any]]:
    """Remove a custom model family."""
    return Call("DELETE", f"/v1/model_registrations/{_uid(model_type)}/{_uid(model_name)}", _dict)


def list_model_registrations(model_type: str, detailed: bool = False) -> Call[list[dict[str, Any]]]:
    """Every family of ``model_type`` (built-in and custom): name, built-in or not; ``detailed`` adds the specs."""
    params = {"detailed": "true" if detailed else "false"}
    return Call("GET", f"/v1/model_registrations/{_uid(model_type)}", _list, params=params)


def get_model_registration(model_type: str, model_name: str) -> Call[dict[str, Any]]:
    """One family as registered: its specs, abilities, context length, template..."""
    return Call("GET", f"/v1/model_registrations/{_uid(model_type)}/{_uid(model_name)}", _dict)


# -- engines ----------------------------------------------------------------------------------------------------------
def query_engine_by_model_name(
    model_name: str, model_type: str | None = "LLM", enable_virtual_env: bool | None = None
) -> Call[dict[str, Any]]:
    """Every engine's verdict on a model over the cluster: ``{engine: [accepted params...] | "reason"}``.
    (``enable_virtual_env`` is Xinference's; engine environments here are installed with :func:`install_engine`.)"""
    path = f"/v1/engines/{_uid(model_type)}/{_uid(model_name)}" if model_type else f"/v1/engines/{_uid(model_name)}"
    params = None if enable_virtual_env is None else {"enable_virtual_env": str(enable_virtual_env).lower()}
    return Call("GET", path, _dict, params=params)


def list_engines() -> Call[dict[str, dict[str, str]]]:
    """Every engine's availability per worker: ``{engine: {worker: "" | "why not"}}``."""
    return Call("GET", "/v1/engines", _same)


def install_engine(
    engine: str, worker_ip: str | None = None, force: bool = False, wait: bool = False
) -> Call[dict[str, Any]]:
    """Start installing ``engine``'s environment on the workers (``wait``: return when it has ended)."""
    body = {"worker_ip": worker_ip, "force": force, "wait": wait}
    return Call("POST", f"/v1/engines/{_uid(engine)}/install", _dict, json=body, unbounded_read=wait)


def engine_install_status(engine: str, worker_ip: str | None = None) -> Call[dict[str, Any]]:
    """Where an engine environment's install stands on each worker (stage, pip's last lines)."""
    return Call("GET", f"/v1/engines/{_uid(engine)}/install", _dict, params=_some(worker_ip=worker_ip))


def uninstall_engine(engine: str, worker_ip: str | None = None) -> Call[dict[str, Any]]:
    """Remove an engine environment from the workers."""
    return Call("POST", f"/v1/engines/{_uid(engine)}/uninstall", _dict, params=_some(worker_ip=worker_ip))


# -- model cache ------------------------------------------------------------------------------------------------------
def list_cached_models(model_name: str | None = None, worker_ip: str | None = None) -> Call[list[dict[str, Any]]]:
    """Downloaded weights on the workers: one entry per repository revision (id, hub, repo, files, size)."""
    return Call(
        "GET",
        "/v1/cache/models",
        lambda body: _dict(body).get("list") or [],
        params=_some(model_name=model_name, worker_ip=worker_ip),
    )


def remove_cached_model(
    entry: str | None = None, model_name: str | None = None, worker_ip: str | None = None
) -> Call[list[dict[str, Any]]]:
    """Delete one cache entry (by id) or every entry of ``model_name``; returns what was removed."""
    return Call(
        "DELETE",
        "/v1/cache/models",
        lambda body: _dict(body).get("removed") or [],
        params=_some(entry=entry, model_name=model_name, worker_ip=worker_ip),
    )


# -- operations: a replica's log, unload/load by hand, launch history, devices, metrics --------------------------------
def get_model_logs(
    model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
) -> Call[dict[str, Any]]:
    """A bounded piece of a replica's log (``lines``, ``offset`` to pass back as ``since`` to follow it)."""
    params = {"tail": tail, **_some(replica=replica, since=since)}
    return Call("GET", f"/v1/models/{_uid(model_uid)}/logs", _dict, params=params)


def unload_model(model_uid: str) -> Call[dict[str, Any]]:
    """End a model's processes now; it stays listed as ``unloaded`` and loads again on its next request."""
    return Call("POST", f"/v1/models/{_uid(model_uid)}/unload", _dict)


def load_model(model_uid: str) -> Call[dict[str, Any]]:
    """Load an unloaded model again; returns once it serves."""
    return Call("POST", f"/v1/models/{_uid(model_uid)}/load", _dict, unbounded_read=True)


def get_launch_history() -> Call[list[dict[str, Any]]]:
    """Launches that reached ready, newest first, with their request and whether they autostart."""
    return Call("GET", "/v1/launch_history", _list)


def list_devices() -> Call[list[dict[str, Any]]]:
    """Every worker's GPUs: index, name, memory total/used and the replicas holding each."""
    return Call("GET", "/v1/cluster/devices", _list)


def get_metrics() -> Call[str]:
    """The Prometheus text of ``GET /metrics``."""
    return Call("GET", "/metrics", str, text=True)


# -- generation by model uid (OpenAI's routes) ------------------------------------------------------------------------
def chat_completion(
    model_uid: str, messages: Sequence[Message], stream: bool = False, **params: Any
) -> Call[dict[str, Any]]:
    """``POST /v1/chat/completions``; ``params`` are OpenAI's fields (``max_tokens``, ``temperature``, ``tools``)."""
    body = {**params, "model": model_uid, "messages": [dict(m) for m in messages], "stream": stream}
    return Call("POST", "/v1/chat/completions", _dict, json=body, stream=stream)


def completions(model_uid: str, prompt: str, stream: bool = False, **params: Any) -> Call[dict[str, Any]]:
    """``POST /v1/completions``: a text completion of ``prompt``."""
    body = {**params, "model": model_uid, "prompt": prompt, "stream": stream}
    return Call("POST", "/v1/completions", _dict, json=body, stream=stream)


def embeddings(
    model_uid: str, input: str | list[str] | list[int] | list[list[int]], **params: Any
) -> Call[dict[str, Any]]:
    """``POST /v1/embeddings`` (OpenAI shape: ``data[i].embedding``, ``usage``)."""
    return Call("POST", "/v1/embeddings", _dict, json={**params, "model": model_uid, "input": input})


def rerank(
    model_uid: str,
    query: str,
    documents: list[str],
    top_n: int | None = None,
    return_documents: bool = False,
    **params: Any,
) -> Call[dict[str, Any]]:
    """``POST /v1/rerank``: documents ordered by relevance to ``query`` (``results[i].relevance_score``)."""
    body = {**params, "model": model_uid, "query": query, "documents": documents, "return_documents": return_documents}
    if top_n is not None:
        body["top_n"] = top_n
    return Call("POST", "/v1/rerank", _dict, json=body)


# -- model handles (Xinference's ``client.get_model(uid)``): the model uid comes first ---------------------------------
def handle_generate(
    model_uid: str, /, prompt: str, generate_config: Mapping[str, Any] | None = None
) -> Call[dict[str, Any]]:
    """A completion of ``prompt``; ``generate_config`` holds the sampling fields, ``stream`` included."""
    config = dict(generate_config or {})
    body = {**config, "model": model_uid, "prompt": prompt}
    return Call("POST", "/v1/completions", _dict, json=body, stream=bool(config.get("stream")))


def legacy_messages(
    prompt: Any, system_prompt: str | None, chat_history: Sequence[Message] | None
) -> list[dict[str, Any]]:
    """The messages of Xinference's pre-1.0 ``chat(prompt, system_prompt, chat_history)``: the history (its
    leading system message replaced by ``system_prompt``, or one put first), then ``prompt`` as the user's turn.
    The caller's history is not changed."""
    history = [dict(m) for m in chat_history or []]
    if system_prompt is not None:
        if history and history[0].get("role") == "system":
            history[0]["content"] = system_prompt
        else:
            history.insert(0, {"role": "system", "content": system_prompt})
    history.append({"role": "user", "content": prompt})
    return history


def xinference_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chat chunk as Xinference's server sends it: every delta's ``content`` a string (``""`` where an engine
    sent ``null`` or nothing, as in a role-only first chunk or a closing one). Code written for Xinference
    concatenates ``delta.get("content", "")`` (LlamaIndex does), which a ``null`` would break."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta")
        if isinstance(delta, dict) and delta.get("content") is None:
            delta["content"] = ""
    return chunk


def handle_chat(
    model_uid: str,
    /,
    messages: Sequence[Message] | str | None = None,
    tools: list[dict[str, Any]] | None = None,
    enable_thinking: bool | None = None,
    generate_config: Mapping[str, Any] | None = None,
    *,
    prompt: Any = None,
    system_prompt: str | None = None,
    chat_history: Sequence[Message] | None = None,
) -> Call[dict[str, Any]]:
    """A chat completion of ``messages`` (a stream of chunks when ``generate_config["stream"]``).

    Also takes Xinference's pre-1.0 form that LlamaIndex and older scripts use: ``chat(prompt=...,
    system_prompt=..., chat_history=[...], generate_config=...)`` (or a string as the first argument).
    ``enable_thinking`` switches a hybrid reasoning model's thinking for this request.
    """
    legacy = prompt is not None or system_prompt is not None or chat_history is not None
    if isinstance(messages, str):
        if prompt is not None:
            raise ValueError("give the prompt once: as the first argument or as prompt=")
        prompt, messages, legacy = messages, None, True
    if legacy:
        if messages is not None:
            raise ValueError("give messages, or prompt with system_prompt and chat_history, not both")
        if prompt is None:
            raise ValueError("prompt is required with system_prompt or chat_history")
        conversation = legacy_messages(prompt, system_prompt, chat_history)
    elif messages is None:
        raise ValueError("messages is required")
    else:
        conversation = [dict(m) for m in messages]
    config = dict(generate_config or {})
    if enable_thinking is not None:
        template_kwargs = config.get("chat_template_kwargs") or {}
        if isinstance(template_kwargs, str):
            template_kwargs = json.loads(template_kwargs)
        config["chat_template_kwargs"] = {
            **template_kwargs,
            "enable_thinking": enable_thinking,
            "thinking": enable_thinking,
        }
    body: dict[str, Any] = {**config, "model": model_uid, "messages": conversation}
    if tools is not None:
        body["tools"] = tools
    stream = bool(config.get("stream"))
    return Call("POST", "/v1/chat/completions", _dict, json=body, stream=stream, each=xinference_chunk)


def handle_create_embedding(model_uid: str, /, input: Any, **kwargs: Any) -> Call[dict[str, Any]]:
    """Embeddings of ``input`` (a text, texts, or token ids), OpenAI's shape."""
    return Call("POST", "/v1/embeddings", _dict, json={**kwargs, "model": model_uid, "input": input})


def handle_rerank(
    model_uid: str,
    /,
    documents: list[str],
    query: str,
    top_n: int | None = None,
    max_chunks_per_doc: int | None = None,
    return_documents: bool | None = None,
    return_len: bool | None = None,
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """``documents`` ordered by relevance to ``query``: ``{"id", "results": [{"index", "relevance_score",
    "document"}], "meta"}``."""
    body = {
        **kwargs,
        "model": model_uid,
        "documents": documents,
        "query": query,
        **_some(
            top_n=top_n,
            max_chunks_per_doc=max_chunks_per_doc,
            return_documents=return_documents,
            return_len=return_len,
        ),
    }
    return Call("POST", "/v1/rerank", _dict, json=body)


_TEXT_TRANSCRIPTS = ("text", "srt", "vtt")


def _transcript_call(
    path: str,
    model_uid: str,
    audio: bytes,
    language: str | None,
    prompt: str | None,
    response_format: str | None,
    temperature: float | None,
    timestamp_granularities: list[str] | None,
    kwargs: Mapping[str, Any],
) -> Call[Any]:
    form: dict[str, Any] = {
        **{k: str(v) for k, v in kwargs.items()},
        "model": model_uid,
        **_some(language=language, prompt=prompt, response_format=response_format, temperature=temperature),
    }
    if timestamp_granularities:
        form["timestamp_granularities[]"] = list(timestamp_granularities)
    as_text = response_format in _TEXT_TRANSCRIPTS
    return Call(
        "POST",
        path,
        _same if as_text else _dict,
        data=form,
        files=[("file", ("file", audio, "application/octet-stream"))],
        text=as_text,
        unbounded_read=True,
    )


def handle_transcriptions(
    model_uid: str,
    /,
    audio: bytes,
    language: str | None = None,
    prompt: str | None = None,
    response_format: str | None = "json",
    temperature: float | None = 0,
    timestamp_granularities: list[str] | None = None,
    **kwargs: Any,
) -> Call[Any]:
    """The words spoken in ``audio`` (the bytes of a wav, mp3, m4a, ogg, webm or flac file): ``{"text"}`` for
    ``json``, with segments (and words, asked with ``timestamp_granularities=["word"]``) for ``verbose_json``, a
    string for ``text``, ``srt`` and ``vtt``."""
    return _transcript_call(
        "/v1/audio/transcriptions",
        model_uid,
        audio,
        language,
        prompt,
        response_format,
        temperature,
        timestamp_granularities,
        kwargs,
    )


def handle_translations(
    model_uid: str,
    /,
    audio: bytes,
    language: str | None = None,
    prompt: str | None = None,
    response_format: str | None = "json",
    temperature: float | None = 0,
    timestamp_granularities: list[str] | None = None,
    **kwargs: Any,
) -> Call[Any]:
    """``audio`` translated into English text (a multilingual speech-to-text model); answers as
    :func:`handle_transcriptions`."""
    return _transcript_call(
        "/v1/audio/translations",
        model_uid,
        audio,
        language,
        prompt,
        response_format,
        temperature,
        timestamp_granularities,
        kwargs,
    )


def handle_speech(
    model_uid: str,
    /,
    input: str,
    voice: str = "",
    response_format: str = "mp3",
    speed: float = 1.0,
    stream: bool = False,
    **kwargs: Any,
) -> Call[bytes]:
    """``input`` spoken by the model: the audio file's bytes in ``response_format`` (mp3, opus, aac, flac, wav,
    pcm), or with ``stream=True`` an iterator of byte chunks, each sent as soon as a sentence is encoded. An empty
    ``voice`` is the model's default voice."""
    body = {**kwargs, "model": model_uid, "input": input, "response_format": response_format, "speed": speed}
    if voice:
        body["voice"] = voice
    return Call("POST", "/v1/audio/speech", _same, json=body, stream=stream, binary=True, unbounded_read=True)


def handle_voices(model_uid: str, /) -> Call[list[dict[str, Any]]]:
    """The voices a text-to-speech model offers, its default first."""
    return Call("GET", f"/v1/models/{_uid(model_uid)}/voices", lambda body: _list(_dict(body).get("data", body)))


def handle_kind(description: Mapping[str, Any]) -> str:
    """Which handle serves a model described by ``describe_model``: ``chat``, ``generate``, ``embedding``,
    ``rerank``, ``audio`` or ``image`` (ValueError for a type this platform does not serve, as Xinference's client
    raises)."""
    model_type = description.get("model_type")
    abilities = description.get("model_ability") or []
    if model_type == "LLM":
        if "chat" in abilities:
            return "chat"
        if "generate" in abilities:
            return "generate"
        raise ValueError(f"Unrecognized model ability: {abilities}")
    if model_type in ("embedding", "rerank", "audio", "image"):
        return str(model_type)
    raise ValueError(f"Unknown model type: {model_type}")


# -- images ------------------------------------------------------------------------------------------------------------
def _image_file(image: str | bytes, name: str) -> tuple[str, bytes, str]:
    """An image argument (its bytes, or the path of a file holding them) as one multipart file."""
    if isinstance(image, str):
        with open(image, "rb") as handle:
            return (name, handle.read(), "application/octet-stream")
    return (name, bytes(image), "application/octet-stream")


def _image_form(
    model_uid: str,
    prompt: str | None,
    negative_prompt: str | None,
    n: int,
    size: str | None,
    response_format: str,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "model": model_uid,
        "n": str(n),
        "response_format": response_format,
        "kwargs": json.dumps(dict(kwargs)),
        **_some(prompt=prompt, negative_prompt=negative_prompt, size=size),
    }


def handle_text_to_image(
    model_uid: str,
    /,
    prompt: str,
    n: int = 1,
    size: str = "1024*1024",
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """Images drawn from ``prompt``: ``{"created", "data": [{"url"} or {"b64_json"}], "seed", ...}``. ``size`` is
    ``W*H`` or ``WxH``; ``kwargs`` carries the extensions (``seed``, ``num_inference_steps``, ``guidance_scale``,
    ``negative_prompt``, ``request_id``), sent as Xinference's client sends them."""
    body = {
        "model": model_uid,
        "prompt": prompt,
        "n": n,
        "size": size,
        "response_format": response_format,
        "kwargs": json.dumps(kwargs),
    }
    return Call("POST", "/v1/images/generations", _dict, json=body, unbounded_read=True)


def handle_image_to_image(
    model_uid: str,
    /,
    image: str | bytes,
    prompt: str,
    negative_prompt: str | None = None,
    n: int = 1,
    size: str | None = None,
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """Images redrawn from ``image`` (its bytes or a file path) following ``prompt``; without ``size``, the input's
    size. ``kwargs`` as :func:`handle_text_to_image`, plus ``strength`` (how much is redrawn, 0-1)."""
    form = _image_form(model_uid, prompt, negative_prompt, n, size, response_format, kwargs)
    return Call(
        "POST",
        "/v1/images/variations",
        _dict,
        data=form,
        files=[("image", _image_file(image, "image"))],
        unbounded_read=True,
    )


def handle_inpainting(
    model_uid: str,
    /,
    image: str | bytes,
    mask_image: str | bytes,
    prompt: str,
    negative_prompt: str | None = None,
    n: int = 1,
    size: str | None = None,
    response_format: str = "url",
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """``image`` repainted where ``mask_image`` is white (black is kept), following ``prompt``; answers as
    :func:`handle_text_to_image`."""
    form = _image_form(model_uid, prompt, negative_prompt, n, size, response_format, kwargs)
    files = [("image", _image_file(image, "image")), ("mask_image", _image_file(mask_image, "mask_image"))]
    return Call("POST", "/v1/images/inpainting", _dict, data=form, files=files, unbounded_read=True)


def get_progress(request_id: str) -> Call[dict[str, Any]]:
    """``{"progress": 0.0-1.0}`` of an image request sent with ``request_id`` in its ``kwargs``."""
    return Call("GET", f"/v1/requests/{quote(request_id, safe='')}/progress", _dict)
