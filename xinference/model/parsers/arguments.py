"""Argument values written as raw text (Qwen3-Coder's ``<parameter=...>``, GLM's ``<arg_value>``, DeepSeek's DSML
``string="false"``) turned into the JSON values OpenAI's ``arguments`` carry.

With the request's tools known, a value becomes the type its parameter declares (``"7"`` is ``7`` for an integer,
stays ``"7"`` for a string); without them, or for a parameter the schema does not name, text that parses as JSON
is taken as that JSON and anything else stays a string. A value that does not fit its declared type is kept as
the model wrote it (a string), never dropped.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from xinference.model.parsers.tool_calls import Tools

__all__ = ["arguments_json", "convert_value", "tool_properties"]


def tool_properties(tools: Tools | None, name: str) -> dict[str, Any] | None:
    """The ``properties`` of tool ``name``'s parameters; None when the tools are unknown or do not name it."""
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            return properties if isinstance(properties, dict) else {}
    return None


#: type names tools declare that JSON Schema spells otherwise (Python's, and loose ones models' tool specs use)
_TYPE_ALIASES = {
    "int": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "str": "string",
    "dict": "object",
    "list": "array",
}


def _types(schema: Any) -> list[str]:
    """The JSON types a parameter schema allows (``type``, a list of them, or ``anyOf``/``oneOf`` branches)."""
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [_TYPE_ALIASES.get(declared.lower(), declared.lower())]
    if isinstance(declared, list):
        return [_TYPE_ALIASES.get(t.lower(), t.lower()) for t in declared if isinstance(t, str)]
    found: list[str] = []
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or ():
            found += [t for t in _types(branch) if t not in found]
    if not found and isinstance(schema.get("enum"), list):
        for value in schema["enum"]:
            kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value))
            if kind and kind not in found:
                found.append(kind)
    return found


def _as(kind: str, text: str) -> tuple[bool, Any]:
    """``(fits, value)`` of ``text`` read as JSON type ``kind``."""
    stripped = text.strip()
    if kind == "string":
        return True, text
    if kind == "integer":
        try:
            return True, int(stripped)
        except ValueError:
            return False, None
    if kind == "number":
        try:
            number = float(stripped)
        except ValueError:
            return False, None
        if number != number or number in (float("inf"), float("-inf")):
            return False, None
        written_whole = "." not in stripped and "e" not in stripped.lower()
        return True, int(number) if number.is_integer() and written_whole else number
    if kind == "boolean":
        lowered = stripped.lower()
        return (True, lowered == "true") if lowered in ("true", "false") else (False, None)
    if kind == "null":
        return (True, None) if stripped.lower() in ("null", "none") else (False, None)
    if kind in ("object", "array"):
        wanted = dict if kind == "object" else list
        for load in (json.loads, ast.literal_eval):
            try:
                value = load(stripped)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, wanted):
                return True, value
        return False, None
    return False, None


def _guess(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return text


def convert_value(text: str, schema: Any) -> Any:
    """``text`` as the JSON value ``schema`` declares (None: unknown parameter, guessed from the text)."""
    kinds = _types(schema)
    if not kinds:
        return _guess(text)
    for kind in sorted(kinds, key=lambda k: k == "string"):  # a typed reading first, the string last
        fits, value = _as(kind, text)
        if fits:
            return value
    return text


def arguments_json(values: dict[str, str], properties: dict[str, Any] | None) -> str:
    """OpenAI's ``arguments`` text for raw parameter values of a tool whose parameter schemas are ``properties``."""
    converted = {
        key: convert_value(raw, (properties or {}).get(key) if properties is not None else None)
        for key, raw in values.items()
    }
    return json.dumps(converted, ensure_ascii=False)
