"""Kimi K2's tool calls: a section of calls, each with the model's own id ``functions.NAME:INDEX``::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
    {"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

(one line in the model's output; broken here for width).

The id is kept as the call's id: Kimi's chat template writes an earlier call back with it, and the tool result is
matched to the call by it. A bare counter id (``0``, as later Kimi models write) names no function: the call is
the request's only tool, or the only one whose parameters cover the arguments, and content when that is unsure.
"""

from __future__ import annotations

import json
from typing import Any

from xinference.model.parsers.arguments import tool_properties
from xinference.model.parsers.blocks import BlockCallFormat, Call, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["KIMI_K2"]

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
ARGUMENTS = "<|tool_call_argument_begin|>"


def _infer_name(arguments: dict[str, Any], tools: Tools | None) -> str | None:
    """The tool a bare-counter call (id ``0``) meant: the only tool, or the only one whose parameters hold every
    argument; None when that is not certain."""
    names = [name for name in map(_tool_name, tools or ()) if name]
    if len(names) == 1:
        return names[0]
    fitting = [name for name in names if set(arguments) <= set(tool_properties(tools, name) or {})]
    return fitting[0] if len(fitting) == 1 and arguments else None


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function", tool) if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else None


def _parse(inner: str, tools: Tools | None) -> list[Call]:
    call_id, sep, raw = inner.partition(ARGUMENTS)
    call_id = call_id.strip()
    if not sep or not call_id:
        return []
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return []
    if not isinstance(arguments, dict):
        return []
    name: str | None = call_id.removeprefix("functions.")
    head, colon, index = call_id.removeprefix("functions.").rpartition(":")
    if colon and index.isdigit():
        name = head
    elif call_id.isdigit():  # later Kimi models number their calls without naming them
        name = _infer_name(arguments, tools)
    if not name:
        return []
    return [Call(name, json.dumps(arguments, ensure_ascii=False), id=call_id)]


def _read(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(
        buf, final, tools, begin=CALL_BEGIN, end=CALL_END, parse=_parse, skips=(SECTION_BEGIN, SECTION_END)
    )


KIMI_K2 = BlockCallFormat(name="kimi_k2", openers=(SECTION_BEGIN, CALL_BEGIN), reader=_read)
