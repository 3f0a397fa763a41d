"""Tools described in the prompt, for chat templates that do not render ``tools`` themselves (SmolLM2's, most
small models'): without it a model cannot know what it may call, even when a grammar forces the call's shape."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JsonArguments", "history_for_template", "template_renders_tools", "tool_system_prompt", "with_tools"]


def template_renders_tools(template: str | None) -> bool:
    """Whether a chat template uses the ``tools`` variable at all."""
    return bool(template) and "tools" in str(template)


def tool_system_prompt(tools: list[dict[str, Any]]) -> str:
    """The tools as a system-prompt paragraph, with the bare-JSON call shape forced calls use."""
    described = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    return (
        "You can call these functions:\n" + described + "\nTo call one, answer with only a JSON object "
        '{"name": <function name>, "arguments": <arguments object>}.'
    )


def with_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the tools described in the (first) system message; the input is not changed."""
    note = tool_system_prompt(tools)
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + note}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


class JsonArguments(dict[str, Any]):
    """An earlier call's arguments as the object templates iterate (Qwen3-Coder's and GLM's ``|items``, ``tojson``)
    that still reads as OpenAI's JSON text where a template treats it as a string: DeepSeek's templates concatenate
    it (``'<｜tool▁sep｜>' + arguments``), others print it (``{{ arguments }}``)."""

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False)

    def __add__(self, other: object) -> str:
        if isinstance(other, str):
            return str(self) + other
        return NotImplemented

    def __radd__(self, other: object) -> str:
        if isinstance(other, str):
            return other + str(self)
        return NotImplemented


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return JsonArguments(arguments) if isinstance(arguments, dict) else arguments


def history_for_template(messages: list[dict[str, Any]], renders_tools: bool) -> list[dict[str, Any]]:
    """Earlier tool calls made renderable (a new list; the input is not changed).

    Templates that render tools (Qwen, Llama) write ``function.arguments`` with ``tojson``: OpenAI's JSON *string*
    would come out encoded twice, so it is given to them as the object it encodes (a :class:`JsonArguments`, which
    the templates that concatenate or print it see as the JSON text). A template that knows nothing of
    tools would print an assistant call as an empty message: the call is written into its content as the JSON the
    model is asked to produce.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not calls:
            out.append(message)
            continue
        if renders_tools:
            fixed = []
            for call in calls:
                function = dict(call.get("function") or {})
                function["arguments"] = _arguments_object(function.get("arguments"))
                fixed.append({**call, "function": function})
            out.append({**message, "tool_calls": fixed})
            continue
        written = "\n".join(
            json.dumps(
                {
                    "name": (c.get("function") or {}).get("name"),
                    "arguments": _arguments_object((c.get("function") or {}).get("arguments")),
                },
                ensure_ascii=False,
            )
            for c in calls
        )
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        rest = {k: v for k, v in message.items() if k != "tool_calls"}
        out.append({**rest, "content": f"{text}\n{written}" if text else written})
    return out
