"""Tools described in the prompt, for chat templates that do not render ``tools`` themselves (SmolLM2's, most
small models'): without it a model cannot know what it may call, even when a grammar forces the call's shape."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["template_renders_tools", "tool_system_prompt", "with_tools"]


def template_renders_tools(template: str | None) -> bool:
    """Whether a chat template uses the ``tools`` variable at all."""
    return bool(template) and "tools" in str(template)


def tool_system_prompt(tools: list[dict[str, Any]]) -> str:
    """The tools as a system-prompt paragraph, with the bare-JSON call shape forced calls use."""
    described = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    return ("You can call these functions:\n" + described + "\nTo call one, answer with only a JSON object "
            '{"name": <function name>, "arguments": <arguments object>}.')


def with_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the tools described in the (first) system message; the input is not changed."""
    note = tool_system_prompt(tools)
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + note}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]
