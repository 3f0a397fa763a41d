"""Check a real answer against the schema the server's own ``/openapi.json`` publishes for that route's 200."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema

_documents: dict[str, dict[str, Any]] = {}


def assert_matches_openapi(endpoint: str, method: str, path: str, body: Any) -> None:
    """``body`` validates against the JSON schema of ``method path``'s 200 response in ``endpoint``'s document."""
    if endpoint not in _documents:
        _documents[endpoint] = httpx.get(f"{endpoint}/openapi.json", timeout=30).json()
    document = _documents[endpoint]
    schema = document["paths"][path][method.lower()]["responses"]["200"]["content"]["application/json"]["schema"]
    assert "$ref" in schema, f"{method} {path} publishes no model for its 200: {schema}"
    jsonschema.Draft202012Validator({**schema, "components": document["components"]}).validate(body)
