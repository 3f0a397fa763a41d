"""Python client of Xinference's REST API: :class:`Client` and its one error, :class:`ClientError`."""

from __future__ import annotations

from xinference.client.restful import DEFAULT_TIMEOUT, Client, ClientError

__all__ = ["DEFAULT_TIMEOUT", "Client", "ClientError"]
