"""Qwen3-Coder's XML tool calls (also Qwen3.5/3.6's): one ``<tool_call>`` block per call, values as raw text::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

A value is the text between its tags less one newline on each side, typed by the tool's schema
(:mod:`.arguments`). A block holding Hermes JSON instead (the model falling back to Qwen2.5's habit) is read too.
"""

from __future__ import annotations

import json
import re

from xinference.model.parsers.arguments import arguments_json, tool_properties
from xinference.model.parsers.blocks import BlockCallFormat, Call, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["QWEN3_CODER", "json_call", "parse_functions"]

_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?=</parameter>|<parameter=|</function>|$)", re.DOTALL)


def _trim(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def json_call(text: str) -> list[Call]:
    """A Hermes-style ``{"name": ..., "arguments": {...}}`` object, for blocks that hold one."""
    try:
        obj = json.loads(text)
    except ValueError:
        return []
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return []
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return []
    if not isinstance(arguments, dict):
        return []
    return [Call(obj["name"], json.dumps(arguments, ensure_ascii=False))]


def parse_functions(inner: str, tools: Tools | None) -> list[Call]:
    """The ``<function=...>`` calls of a block's text (empty when it holds none)."""
    if inner.strip().startswith("{"):
        return json_call(inner.strip())
    calls = []
    for match in _FUNCTION.finditer(inner):
        name = match.group(1).strip()
        if not name:
            return []
        values = {p.group(1).strip(): _trim(p.group(2)) for p in _PARAMETER.finditer(match.group(2))}
        calls.append(Call(name, arguments_json(values, tool_properties(tools, name))))
    return calls


def _read(buf: str, final: bool, tools: Tools | None) -> Step | None:
    if buf.lstrip().startswith("<function="):  # a call written without its <tool_call> wrapper
        return read_block(buf, final, tools, begin="", end="</function>", parse=parse_functions, cut_ok=_closed)
    return read_block(buf, final, tools, begin="<tool_call>", end="</tool_call>", parse=parse_functions, cut_ok=_closed)


def _closed(inner: str) -> bool:
    return inner.rstrip().endswith(("</function>", "}"))


QWEN3_CODER = BlockCallFormat(name="qwen3_coder", openers=("<tool_call>", "<function="), reader=_read)
