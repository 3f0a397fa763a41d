"""Forced tool calls (``tool_choice`` ``required`` or a named function) for the managed-server engines, built on the
server's structured output.

Why not the server's own forced-tool path: measured with vLLM 0.32 (``--tool-call-parser hermes``), both
``required`` and a named function came back with ``arguments: "\\"Paris\\""``, a JSON string instead of the object
the tool's schema asks for, while a ``json_schema`` response format with the very same parameters schema returned
``{"city": "Paris"}``. So a forced call is sent as a ``json_schema`` request over the tools' parameters (the tools
stay in the prompt, ``tool_choice`` becomes ``none``), and the JSON that comes back is validated and returned as a
proper ``tool_calls`` entry with ``finish_reason: "tool_calls"``.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from xinference.errors import EngineError, InvalidRequest

__all__ = ["ForcedToolCall", "forced_tool_call"]


def _functions(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    functions: dict[str, dict[str, Any]] = {}
    for tool in request.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type", "function") != "function" or not isinstance(function, dict) or not function.get("name"):
            raise InvalidRequest(
                "each tool must be {'type': 'function', 'function': {'name': ..., 'parameters': ...}}", param="tools"
            )
        functions[str(function["name"])] = function
    return functions


def _parameters(function: dict[str, Any]) -> dict[str, Any]:
    parameters = function.get("parameters")
    if parameters is None:
        return {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise InvalidRequest(f"tool {function['name']!r}: parameters must be a JSON schema object", param="tools")
    return parameters


def forced_tool_call(request: dict[str, Any]) -> ForcedToolCall | None:
    """The forced call a request asks for, or None when ``tool_choice`` is absent, ``auto`` or ``none``."""
    choice = request.get("tool_choice")
    if choice in (None, "auto", "none"):
        return None
    functions = _functions(request)
    if not functions:
        raise InvalidRequest("tool_choice needs tools", param="tool_choice")
    if choice == "required":
        names = list(functions)
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict) and choice["function"].get("name"):
        name = str(choice["function"]["name"])
        if name not in functions:
            raise InvalidRequest(
                f"tool_choice names {name!r}, which is not among the tools ({', '.join(functions)})",
                param="tool_choice",
            )
        names = [name]
    else:
        raise InvalidRequest(
            "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
            param="tool_choice",
        )
    return ForcedToolCall({name: functions[name] for name in names}, request)


@dataclass
class ForcedToolCall:
    """One forced call: the candidate functions and the original request."""

    functions: dict[str, dict[str, Any]]
    original: dict[str, Any]

    @property
    def single(self) -> str | None:
        return next(iter(self.functions)) if len(self.functions) == 1 else None

    def schema(self) -> dict[str, Any]:
        """The JSON the model must write: the arguments of the one function, or ``{"name", "arguments"}`` with one
        alternative per candidate."""
        if self.single is not None:
            return _parameters(self.functions[self.single])
        return {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": [name]}, "arguments": _parameters(function)},
                    "required": ["name", "arguments"],
                    "additionalProperties": False,
                }
                for name, function in self.functions.items()
            ]
        }

    @property
    def request(self) -> dict[str, Any]:
        """The structured-output request sent to the server instead of the forced one."""
        body = dict(self.original)
        body["tool_choice"] = "none"
        body.pop("parallel_tool_calls", None)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": self.schema(), "strict": True},
        }
        body["messages"] = self._with_instruction(list(body.get("messages") or ()))
        return body

    def _with_instruction(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.single is not None:
            function = self.functions[self.single]
            what = (
                f"Call the function {self.single!r} now: answer only with its arguments as a JSON object. "
                f"{function.get('description') or ''}".strip()
            )
        else:
            what = (
                'Call one of these functions now: answer only with a JSON object {"name": ..., "arguments": '
                "{...}}. Functions: "
                + "; ".join(f"{name}: {f.get('description') or ''}".strip() for name, f in self.functions.items())
            )
        if (
            messages
            and messages[0].get("role") in ("system", "developer")
            and isinstance(messages[0].get("content"), str)
        ):
            messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{what}"}
        else:
            messages.insert(0, {"role": "system", "content": what})
        return messages

    def to_reply(self, reply: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        """Turn the server's structured answer into a ``tool_calls`` reply; the arguments are validated first."""
        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        if choice.get("finish_reason") == "length":
            raise InvalidRequest(
                f"max_tokens ended the forced call to {' / '.join(self.functions)} before its "
                f"arguments were complete; raise max_tokens",
                param="max_tokens",
            )
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise EngineError(f"the model's forced tool call is not valid JSON: {text[:200]!r}") from exc
        if self.single is not None:
            name, arguments = self.single, value
        else:
            if not isinstance(value, dict) or value.get("name") not in self.functions:
                raise EngineError(f"the model's forced tool call names no known function: {text[:200]!r}")
            name, arguments = str(value["name"]), value.get("arguments")
        _validate(arguments, _parameters(self.functions[name]), name)
        call = {
            "id": call_id or f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        new_message = {"role": "assistant", "content": None, "tool_calls": [call]}
        if message.get("reasoning_content"):
            new_message["reasoning_content"] = message["reasoning_content"]
        return {**reply, "choices": [{**choice, "message": new_message, "finish_reason": "tool_calls"}]}

    @staticmethod
    def as_chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
        """A finished forced-call reply as the chunks of a stream (the call arrives whole, in one delta)."""
        base = {
            "id": reply.get("id") or f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion.chunk",
            "created": reply.get("created") or int(time.time()),
            "model": reply.get("model"),
        }
        call = reply["choices"][0]["message"]["tool_calls"][0]
        delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        if include_usage and reply.get("usage"):
            chunks.append({**base, "choices": [], "usage": reply["usage"]})
        return chunks


def _validate(arguments: Any, schema: dict[str, Any], name: str) -> None:
    """EngineError when ``arguments`` do not satisfy the tool's parameters schema."""
    try:
        import jsonschema
    except ImportError:  # no validator installed: at least the shape the grammar guarantees
        if schema.get("type") == "object" and not isinstance(arguments, dict):
            raise EngineError(f"the model's call to {name!r} has arguments that are not an object") from None
        return
    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError as exc:
        raise EngineError(f"the model's call to {name!r} does not match its parameters: {exc.message}") from exc
    except jsonschema.SchemaError as exc:
        raise InvalidRequest(f"tool {name!r} has an invalid parameters schema: {exc.message}", param="tools") from exc
