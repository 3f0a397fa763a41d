"""Python client of the REST API, with Xinference's names and shapes: :class:`Client` (``RESTfulClient``),
:class:`AsyncClient` (``AsyncRESTfulClient``), the model handles ``get_model`` returns, and the one error
:class:`ClientError` (a ``RuntimeError``, as Xinference's client raises)."""

from __future__ import annotations

from xinference.client.calls import Message, NGpu
from xinference.client.errors import ClientError
from xinference.client.restful.async_restful_client import (
    AsyncClient,
    AsyncRESTfulAudioModelHandle,
    AsyncRESTfulChatModelHandle,
    AsyncRESTfulClient,
    AsyncRESTfulEmbeddingModelHandle,
    AsyncRESTfulGenerateModelHandle,
    AsyncRESTfulImageModelHandle,
    AsyncRESTfulModelHandle,
    AsyncRESTfulRerankModelHandle,
)
from xinference.client.restful.restful_client import (
    Client,
    RESTfulAudioModelHandle,
    RESTfulChatModelHandle,
    RESTfulClient,
    RESTfulEmbeddingModelHandle,
    RESTfulGenerateModelHandle,
    RESTfulImageModelHandle,
    RESTfulModelHandle,
    RESTfulRerankModelHandle,
)
from xinference.client.transport import DEFAULT_TIMEOUT

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncClient",
    "AsyncRESTfulAudioModelHandle",
    "AsyncRESTfulChatModelHandle",
    "AsyncRESTfulClient",
    "AsyncRESTfulEmbeddingModelHandle",
    "AsyncRESTfulGenerateModelHandle",
    "AsyncRESTfulImageModelHandle",
    "AsyncRESTfulModelHandle",
    "AsyncRESTfulRerankModelHandle",
    "Client",
    "ClientError",
    "Message",
    "NGpu",
    "RESTfulAudioModelHandle",
    "RESTfulChatModelHandle",
    "RESTfulClient",
    "RESTfulEmbeddingModelHandle",
    "RESTfulGenerateModelHandle",
    "RESTfulImageModelHandle",
    "RESTfulModelHandle",
    "RESTfulRerankModelHandle",
]
