"""Xinference's client modules, at the paths Xinference has them (``xinference.client.restful.restful_client``)."""

from __future__ import annotations

from xinference.client.restful.async_restful_client import AsyncClient, AsyncRESTfulClient
from xinference.client.restful.restful_client import Client, RESTfulClient

__all__ = ["AsyncClient", "AsyncRESTfulClient", "Client", "RESTfulClient"]
