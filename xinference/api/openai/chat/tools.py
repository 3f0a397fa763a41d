"""Checks shared by the APIs that declare function tools in their own shape (Anthropic Messages, OpenAI
Responses) before translating them into chat ``tools``.

A tool whose name or parameter schema is malformed is the client's mistake: it is refused here with a 400 naming the
field, instead of failing later inside a chat template or a grammar compiler.
"""

from __future__ import annotations

import re
from typing import Any

from xinference.errors import InvalidRequest

__all__ = ["check_parameters_schema", "check_tool_name", "function_tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


def check_tool_name(name: object, param: str) -> str:
    """A tool name as the chat templates and parsers expect it: 1-128 letters, digits, ``_`` or ``-``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest(
            f"invalid tool name {str(name)[:80]!r}: use 1-128 letters, digits, '_' or '-'", param=param
        )
    return name


def check_parameters_schema(schema: object, param: str) -> dict[str, Any]:
    """A tool's parameters: a JSON Schema object whose ``type`` is ``object`` (the arguments are a JSON object).

    The check is structural (types of the keywords the tool parsers and grammars read), not a full meta-schema
    validation.
    """
    if not isinstance(schema, dict):
        raise InvalidRequest("a tool's schema must be a JSON Schema object", param=param)
    if schema.get("type", "object") != "object":
        raise InvalidRequest(f"a tool's schema must have type 'object', not {schema.get('type')!r}", param=param)
    _check_node(schema, param)
    return schema


def _check_node(node: dict[str, Any], param: str) -> None:
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for value in kinds:
        if value not in _JSON_TYPES:
            raise InvalidRequest(f"unknown JSON Schema type {value!r}", param=f"{param}.type")
    properties = node.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            raise InvalidRequest("'properties' must be an object mapping names to schemas", param=f"{param}.properties")
        for name, sub in properties.items():
            if not isinstance(sub, (dict, bool)):
                raise InvalidRequest(
                    f"the schema of property {name!r} must be an object", param=f"{param}.properties.{name}"
                )
            if isinstance(sub, dict):
                _check_node(sub, f"{param}.properties.{name}")
    required = node.get("required")
    if required is not None and (not isinstance(required, list) or not all(isinstance(r, str) for r in required)):
        raise InvalidRequest("'required' must be a list of property names", param=f"{param}.required")
    items = node.get("items")
    if items is not None:
        if not isinstance(items, (dict, bool)):
            raise InvalidRequest("'items' must be a schema object", param=f"{param}.items")
        if isinstance(items, dict):
            _check_node(items, f"{param}.items")


def function_tool(
    name: str, description: str | None, parameters: dict[str, Any], strict: bool | None = None
) -> dict[str, Any]:
    """The chat-completions form of one function tool."""
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}
