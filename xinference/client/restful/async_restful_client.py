"""The asynchronous client: :class:`AsyncClient` (also named ``AsyncRESTfulClient``, as in Xinference) and its
model handles. The same calls as :mod:`xinference.client.restful.restful_client`, awaited::

    from xinference.client import AsyncClient

    async with AsyncClient("http://127.0.0.1:9997") as client:
        model = await client.get_model("smollm2-instruct")
        reply = await model.chat([{"role": "user", "content": "Hi"}], generate_config={"max_tokens": 16})
        async for chunk in await model.chat([{"role": "user", "content": "Hi"}], generate_config={"stream": True}):
            ...

A streamed call is awaited first (the request is sent and refused there if it is bad), then iterated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, Literal, overload

import httpx

import xinference.client.calls as calls
from xinference import settings
from xinference.client.calls import Message
from xinference.client.errors import ClientError
from xinference.client.transport import (
    DEFAULT_TIMEOUT,
    AsyncTransport,
    HasAsync,
    async_call,
    async_handle_bytes,
    async_handle_call,
    async_handle_stream,
)

__all__ = [
    "AsyncRESTfulAudioModelHandle",
    "AsyncRESTfulImageModelHandle",
    "AsyncClient",
    "AsyncRESTfulChatModelHandle",
    "AsyncRESTfulClient",
    "AsyncRESTfulEmbeddingModelHandle",
    "AsyncRESTfulGenerateModelHandle",
    "AsyncRESTfulModelHandle",
    "AsyncRESTfulRerankModelHandle",
]


class AsyncRESTfulModelHandle(HasAsync):
    """A running model, as ``await client.get_model(uid)`` returns it; it shares its client's connections."""

    def __init__(self, model_uid: str, transport: AsyncTransport) -> None:
        self._model_uid = model_uid
        self._transport = transport

    @property
    def model_uid(self) -> str:
        return self._model_uid

    async def close(self) -> None:
        """Nothing to release: the connections belong to the client (kept for Xinference's API)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model_uid!r})"


class AsyncRESTfulGenerateModelHandle(AsyncRESTfulModelHandle):
    generate = async_handle_stream(calls.handle_generate)


class AsyncRESTfulChatModelHandle(AsyncRESTfulGenerateModelHandle):
    chat = async_handle_stream(calls.handle_chat)


class AsyncRESTfulEmbeddingModelHandle(AsyncRESTfulModelHandle):
    create_embedding = async_handle_call(calls.handle_create_embedding)


class AsyncRESTfulRerankModelHandle(AsyncRESTfulModelHandle):
    rerank = async_handle_call(calls.handle_rerank)


class AsyncRESTfulAudioModelHandle(AsyncRESTfulModelHandle):
    """An audio model: speech to text (``transcriptions``, ``translations``) or text to speech (``speech``,
    ``voices``), as Xinference's audio handle."""

    transcriptions = async_handle_call(calls.handle_transcriptions)
    translations = async_handle_call(calls.handle_translations)
    speech = async_handle_bytes(calls.handle_speech)
    voices = async_handle_call(calls.handle_voices)


class AsyncRESTfulImageModelHandle(AsyncRESTfulModelHandle):
    """An image model: ``text_to_image``, ``image_to_image`` and ``inpainting``, as Xinference's image handle."""

    text_to_image = async_handle_call(calls.handle_text_to_image)
    image_to_image = async_handle_call(calls.handle_image_to_image)
    inpainting = async_handle_call(calls.handle_inpainting)


_HANDLES: dict[str, type[AsyncRESTfulModelHandle]] = {
    "chat": AsyncRESTfulChatModelHandle,
    "generate": AsyncRESTfulGenerateModelHandle,
    "embedding": AsyncRESTfulEmbeddingModelHandle,
    "rerank": AsyncRESTfulRerankModelHandle,
    "audio": AsyncRESTfulAudioModelHandle,
    "image": AsyncRESTfulImageModelHandle,
}


class AsyncClient(HasAsync):
    """The asynchronous twin of :class:`~xinference.client.Client`: the same arguments and methods, awaited.
    Close it (``await client.close()``, or ``async with``) when done; ``transport`` takes an
    ``httpx.AsyncBaseTransport``."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or settings.endpoint()).rstrip("/")
        self._transport = AsyncTransport(self.base_url, api_key, timeout, transport)

    @property
    def endpoint(self) -> str:
        return self.base_url

    @property
    def timeout(self) -> float | None:
        return self._transport.timeout

    # -- lifecycle -----------------------------------------------------------------------------------------------------
    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def login(self, username: str, password: str) -> None:
        """See :meth:`xinference.client.Client.login`."""
        if await self._transport.run(calls.cluster_auth()):
            raise ClientError(
                "this server authenticates with API keys, not user names and passwords: pass api_key= to the "
                "client (one of the server's XINFERENCE_API_KEYS)",
                status_code=401,
                error_type="authentication_error",
            )

    # -- cluster -------------------------------------------------------------------------------------------------------
    status = async_call(calls.status)
    get_cluster_version = async_call(calls.get_cluster_version)
    get_cluster_info = async_call(calls.get_cluster_info)
    get_workers_info = async_call(calls.get_workers_info)
    get_supervisor_info = async_call(calls.get_supervisor_info)

    # -- models --------------------------------------------------------------------------------------------------------
    list_models = async_call(calls.list_models)
    launch_model = async_call(calls.launch_model)
    describe_model = async_call(calls.describe_model)
    terminate_model = async_call(calls.terminate_model)
    get_launch_model_progress = async_call(calls.get_launch_model_progress)
    cancel_launch_model = async_call(calls.cancel_launch_model)
    get_instance_info = async_call(calls.get_instance_info)
    get_model_events = async_call(calls.get_model_events)
    add_model_replica = async_call(calls.add_model_replica)
    terminate_model_replica = async_call(calls.terminate_model_replica)
    abort_request = async_call(calls.abort_request)
    get_progress = async_call(calls.get_progress)

    async def get_model(self, model_uid: str) -> AsyncRESTfulModelHandle:
        """See :meth:`xinference.client.Client.get_model`."""
        kind = calls.handle_kind(await self.describe_model(model_uid))
        return _HANDLES[kind](model_uid, self._transport)

    # -- registrations -------------------------------------------------------------------------------------------------
    register_model = async_call(calls.register_model)
    unregister_model = async_call(calls.unregister_model)
    list_model_registrations = async_call(calls.list_model_registrations)
    get_model_registration = async_call(calls.get_model_registration)

    # -- engines -------------------------------------------------------------------------------------------------------
    query_engine_by_model_name = async_call(calls.query_engine_by_model_name)
    list_engines = async_call(calls.list_engines)
    install_engine = async_call(calls.install_engine)
    engine_install_status = async_call(calls.engine_install_status)
    uninstall_engine = async_call(calls.uninstall_engine)

    # -- model cache ---------------------------------------------------------------------------------------------------
    list_cached_models = async_call(calls.list_cached_models)
    remove_cached_model = async_call(calls.remove_cached_model)

    # -- operations ----------------------------------------------------------------------------------------------------
    get_model_logs = async_call(calls.get_model_logs)
    unload_model = async_call(calls.unload_model)
    load_model = async_call(calls.load_model)
    get_launch_history = async_call(calls.get_launch_history)
    list_devices = async_call(calls.list_devices)
    get_metrics = async_call(calls.get_metrics)

    # -- generation by uid (OpenAI's routes) ---------------------------------------------------------------------------
    embeddings = async_call(calls.embeddings)
    rerank = async_call(calls.rerank)

    @overload
    async def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    async def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[True], **params: Any
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def chat_completion(
        self, model_uid: str, messages: Sequence[Message], stream: bool = False, **params: Any
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """See :meth:`xinference.client.Client.chat_completion` (a stream is an async iterator)."""
        return await self._transport.run_or_stream(calls.chat_completion(model_uid, messages, stream, **params))

    @overload
    async def completions(
        self, model_uid: str, prompt: str, stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    async def completions(
        self, model_uid: str, prompt: str, stream: Literal[True], **params: Any
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def completions(
        self, model_uid: str, prompt: str, stream: bool = False, **params: Any
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """See :meth:`xinference.client.Client.completions`."""
        return await self._transport.run_or_stream(calls.completions(model_uid, prompt, stream, **params))


#: Xinference's other name for :class:`AsyncClient`.
AsyncRESTfulClient = AsyncClient
