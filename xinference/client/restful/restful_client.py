"""The synchronous client: :class:`Client` (also named ``RESTfulClient``, as in Xinference) and its model handles.

Xinference's documented use runs unchanged::

    from xinference.client import Client

    client = Client("http://127.0.0.1:9997")
    uid = client.launch_model(model_name="smollm2-instruct", model_engine="llama.cpp")
    model = client.get_model(uid)
    model.chat([{"role": "user", "content": "Hi"}], generate_config={"max_tokens": 16})
    for chunk in model.chat([{"role": "user", "content": "Hi"}], generate_config={"stream": True}):
        print(chunk["choices"][0]["delta"].get("content", ""), end="")
    client.terminate_model(uid)

Every method is one of :mod:`xinference.client.calls`, run by :class:`~xinference.client.transport.SyncTransport`;
:mod:`xinference.client.restful.async_restful_client` runs the same calls asynchronously. Every failure raises a
:class:`~xinference.client.errors.ClientError` (a ``RuntimeError``) carrying the server's message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, Literal, overload

import httpx

import xinference.client.calls as calls
from xinference import settings
from xinference.client.calls import Message
from xinference.client.errors import ClientError
from xinference.client.transport import (
    DEFAULT_TIMEOUT,
    HasSync,
    SyncTransport,
    sync_call,
    sync_handle_bytes,
    sync_handle_call,
    sync_handle_stream,
)

__all__ = [
    "RESTfulAudioModelHandle",
    "RESTfulImageModelHandle",
    "Client",
    "RESTfulChatModelHandle",
    "RESTfulClient",
    "RESTfulEmbeddingModelHandle",
    "RESTfulGenerateModelHandle",
    "RESTfulModelHandle",
    "RESTfulRerankModelHandle",
]


class RESTfulModelHandle(HasSync):
    """A running model, as ``client.get_model(uid)`` returns it; it shares its client's connections."""

    def __init__(self, model_uid: str, transport: SyncTransport) -> None:
        self._model_uid = model_uid
        self._transport = transport

    @property
    def model_uid(self) -> str:
        return self._model_uid

    def close(self) -> None:
        """Nothing to release: the connections belong to the client (kept for Xinference's API)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model_uid!r})"


class RESTfulGenerateModelHandle(RESTfulModelHandle):
    """An LLM that completes text (``generate`` ability)."""

    generate = sync_handle_stream(calls.handle_generate)


class RESTfulChatModelHandle(RESTfulGenerateModelHandle):
    """An LLM that chats (``chat`` ability): ``chat(messages, tools, enable_thinking, generate_config)``, or the
    pre-1.0 ``chat(prompt=..., system_prompt=..., chat_history=...)``."""

    chat = sync_handle_stream(calls.handle_chat)


class RESTfulEmbeddingModelHandle(RESTfulModelHandle):
    """An embedding model."""

    create_embedding = sync_handle_call(calls.handle_create_embedding)


class RESTfulRerankModelHandle(RESTfulModelHandle):
    """A rerank model."""

    rerank = sync_handle_call(calls.handle_rerank)


class RESTfulAudioModelHandle(RESTfulModelHandle):
    """An audio model: speech to text (``transcriptions``, ``translations``) or text to speech (``speech``,
    ``voices``), as Xinference's audio handle."""

    transcriptions = sync_handle_call(calls.handle_transcriptions)
    translations = sync_handle_call(calls.handle_translations)
    speech = sync_handle_bytes(calls.handle_speech)
    voices = sync_handle_call(calls.handle_voices)


class RESTfulImageModelHandle(RESTfulModelHandle):
    """An image model: ``text_to_image``, ``image_to_image`` and ``inpainting``, as Xinference's image handle."""

    text_to_image = sync_handle_call(calls.handle_text_to_image)
    image_to_image = sync_handle_call(calls.handle_image_to_image)
    inpainting = sync_handle_call(calls.handle_inpainting)


_HANDLES: dict[str, type[RESTfulModelHandle]] = {
    "chat": RESTfulChatModelHandle,
    "generate": RESTfulGenerateModelHandle,
    "embedding": RESTfulEmbeddingModelHandle,
    "rerank": RESTfulRerankModelHandle,
    "audio": RESTfulAudioModelHandle,
    "image": RESTfulImageModelHandle,
}


class Client(HasSync):
    """A connection to one Xinference endpoint; close it (or use it as a context manager) when done.

    ``base_url`` defaults to ``XINFERENCE_ENDPOINT`` (or http://127.0.0.1:9997); ``api_key`` is sent as a bearer
    token when the server was started with ``XINFERENCE_API_KEYS``. ``timeout`` bounds connecting and each read;
    launching and loading wait without a read limit, since weights may have to be downloaded first.
    ``transport`` replaces httpx's network transport (``httpx.MockTransport`` in tests, a Unix-socket
    transport, ...); the client closes it when it is closed.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or settings.endpoint()).rstrip("/")
        self._transport = SyncTransport(self.base_url, api_key, timeout, transport)

    @property
    def endpoint(self) -> str:
        """The server's base URL (what ``base_url`` was, without a trailing slash)."""
        return self.base_url

    @property
    def timeout(self) -> float | None:
        return self._transport.timeout

    # -- lifecycle -----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def login(self, username: str, password: str) -> None:
        """Xinference's user login. This server authenticates with API keys only: without auth this does nothing
        (as Xinference's client does); with auth it raises, saying to pass ``api_key=`` instead."""
        if self._transport.run(calls.cluster_auth()):
            raise ClientError(
                "this server authenticates with API keys, not user names and passwords: pass api_key= to the "
                "client (one of the server's XINFERENCE_API_KEYS)",
                status_code=401,
                error_type="authentication_error",
            )

    # -- cluster -------------------------------------------------------------------------------------------------------
    status = sync_call(calls.status)
    get_cluster_version = sync_call(calls.get_cluster_version)
    get_cluster_info = sync_call(calls.get_cluster_info)
    get_workers_info = sync_call(calls.get_workers_info)
    get_supervisor_info = sync_call(calls.get_supervisor_info)

    # -- models --------------------------------------------------------------------------------------------------------
    list_models = sync_call(calls.list_models)
    launch_model = sync_call(calls.launch_model)
    describe_model = sync_call(calls.describe_model)
    terminate_model = sync_call(calls.terminate_model)
    get_launch_model_progress = sync_call(calls.get_launch_model_progress)
    cancel_launch_model = sync_call(calls.cancel_launch_model)
    get_instance_info = sync_call(calls.get_instance_info)
    get_model_events = sync_call(calls.get_model_events)
    add_model_replica = sync_call(calls.add_model_replica)
    terminate_model_replica = sync_call(calls.terminate_model_replica)
    abort_request = sync_call(calls.abort_request)
    get_progress = sync_call(calls.get_progress)

    def get_model(self, model_uid: str) -> RESTfulModelHandle:
        """A handle on a running model, by its type and abilities: chat (``chat``, ``generate``), generate,
        embedding (``create_embedding``) or rerank (``rerank``). A ClientError (404) when there is no such uid."""
        kind = calls.handle_kind(self.describe_model(model_uid))
        return _HANDLES[kind](model_uid, self._transport)

    # -- registrations -------------------------------------------------------------------------------------------------
    register_model = sync_call(calls.register_model)
    unregister_model = sync_call(calls.unregister_model)
    list_model_registrations = sync_call(calls.list_model_registrations)
    get_model_registration = sync_call(calls.get_model_registration)

    # -- engines -------------------------------------------------------------------------------------------------------
    query_engine_by_model_name = sync_call(calls.query_engine_by_model_name)
    list_engines = sync_call(calls.list_engines)
    install_engine = sync_call(calls.install_engine)
    engine_install_status = sync_call(calls.engine_install_status)
    uninstall_engine = sync_call(calls.uninstall_engine)

    # -- model cache ---------------------------------------------------------------------------------------------------
    list_cached_models = sync_call(calls.list_cached_models)
    remove_cached_model = sync_call(calls.remove_cached_model)

    # -- operations ----------------------------------------------------------------------------------------------------
    get_model_logs = sync_call(calls.get_model_logs)
    unload_model = sync_call(calls.unload_model)
    load_model = sync_call(calls.load_model)
    get_launch_history = sync_call(calls.get_launch_history)
    list_devices = sync_call(calls.list_devices)
    get_metrics = sync_call(calls.get_metrics)

    # -- generation by uid (OpenAI's routes) ---------------------------------------------------------------------------
    embeddings = sync_call(calls.embeddings)
    rerank = sync_call(calls.rerank)

    @overload
    def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[True], **params: Any
    ) -> Iterator[dict[str, Any]]: ...

    def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: bool = False, **params: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """A chat completion: the response dict, or (``stream=True``) an iterator of chunk dicts.

        ``params`` are OpenAI's fields (``max_tokens``, ``temperature``, ``tools``...). A bad request raises here,
        before any chunk; a failure after the stream started raises from the iterator.
        """
        return self._transport.run_or_stream(calls.chat_completion(model_uid, messages, stream, **params))

    @overload
    def completions(
        self, model_uid: str, prompt: str, stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    def completions(
        self, model_uid: str, prompt: str, stream: Literal[True], **params: Any
    ) -> Iterator[dict[str, Any]]: ...

    def completions(
        self, model_uid: str, prompt: str, stream: bool = False, **params: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """A text completion of ``prompt``: the response dict, or an iterator of chunk dicts when streaming."""
        return self._transport.run_or_stream(calls.completions(model_uid, prompt, stream, **params))


#: Xinference's other name for :class:`Client`.
RESTfulClient = Client
