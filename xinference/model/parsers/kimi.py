"""Kimi K2's tool calls: a section of calls, each with the model's own id ``functions.NAME:INDEX``::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
    {"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

(one line in the model's output; broken here for width).

The id is kept as the call's id: Kimi's chat template writes an earlier call back with it, and the tool result is
matched to the call by it.
"""

from __future__ import annotations

import json

from xinference.model.parsers.blocks import BlockCallFormat, Call, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["KIMI_K2"]

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
ARGUMENTS = "<|tool_call_argument_begin|>"


def _parse(inner: str, tools: Tools | None) -> list[Call]:
    call_id, sep, raw = inner.partition(ARGUMENTS)
    call_id = call_id.strip()
    if not sep or not call_id:
        return []
    name = call_id.removeprefix("functions.")
    head, colon, index = name.rpartition(":")
    if colon and index.isdigit():
        name = head
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return []
    if not name or not isinstance(arguments, dict):
        return []
    return [Call(name, json.dumps(arguments, ensure_ascii=False), id=call_id)]


def _read(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(
        buf, final, tools, begin=CALL_BEGIN, end=CALL_END, parse=_parse, skips=(SECTION_BEGIN, SECTION_END)
    )


KIMI_K2 = BlockCallFormat(name="kimi_k2", openers=(SECTION_BEGIN, CALL_BEGIN), reader=_read)
