"""Llama 3.1 / 3.2 JSON tool calls: the message is ``{"name": ..., "parameters": {...}}`` (optionally after
``<|python_tag|>``; several calls separated by ``;``).

A message that starts with other text is content: Llama writes its JSON calls as the whole message.
"""

from __future__ import annotations

from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["LLAMA3_JSON"]

LLAMA3_JSON = ToolCallFormat(
    name="llama3_json",
    openers=("<|python_tag|>",),
    opens_on_json=True,
    separators=(";",),
    argument_keys=("parameters", "arguments"),
)
