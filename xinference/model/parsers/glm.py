"""GLM's tool calls.

- ``glm45`` (GLM-4.5, 4.6, 4.7, 5): ``<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>...</tool_call>``
  per call (4.7 drops the newlines); string values raw, others as JSON, typed by the tool's schema when known.
- ``glm4`` (GLM-4-9B-chat, GLM-4-0414): the message opens with the function name on its own line and the
  arguments as a JSON object, ``get_weather\\n{"city": "Beijing"}`` (the chat template writes an assistant call as
  ``<|assistant|>{name}\\n{arguments}``). Xinference's ``glm4`` parser name also covers GLM-4.5+ and a fenced
  ```` ```json {"name": ..., "arguments": ...}``` ```` answer, so this format reads those shapes too.
"""

from __future__ import annotations

import json
import re

from xinference.model.parsers.arguments import arguments_json, tool_properties
from xinference.model.parsers.base import scan_value
from xinference.model.parsers.blocks import Bad, BlockCallFormat, Call, Done, Found, Step, read_block
from xinference.model.parsers.qwen3_coder import json_call
from xinference.model.parsers.tool_calls import Tools

__all__ = ["GLM4", "GLM45"]

_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)(?:</arg_value>|$)", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


def _parse_xml(inner: str, tools: Tools | None) -> list[Call]:
    text = inner.strip()
    if text.startswith("{"):
        return json_call(text)
    cut = text.find("<arg_key>")
    name = (text if cut < 0 else text[:cut]).strip()
    if not name or any(ch in name for ch in " \t\n<>{}"):
        return []
    values = {m.group(1).strip(): m.group(2) for m in _ARG.finditer(text)}
    return [Call(name, arguments_json(values, tool_properties(tools, name)))]


def _read_glm45(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(buf, final, tools, begin="<tool_call>", end="</tool_call>", parse=_parse_xml, cut_ok=_closed)


def _closed(inner: str) -> bool:
    return inner.rstrip().endswith(("</arg_value>", "}"))


GLM45 = BlockCallFormat(name="glm45", openers=("<tool_call>",), reader=_read_glm45)

_FENCE = "```json"


def _read_glm4(buf: str, final: bool, tools: Tools | None) -> Step | None:
    i = len(buf) - len(buf.lstrip())
    rest = buf[i:]
    if not rest:
        return Done(i) if final else None
    if rest.startswith("<tool_call>") or (not final and "<tool_call>".startswith(rest)):
        return _read_glm45(buf, final, tools)
    if rest.startswith(_FENCE):
        close = rest.find("```", len(_FENCE))
        if close < 0:
            return None if not final else Bad(len(buf))
        calls = json_call(rest[len(_FENCE) : close].strip())
        return Found(tuple(calls), i + close + 3) if calls else Bad(i + close + 3)
    if not final and _FENCE.startswith(rest):
        return None
    return _read_named_json(buf, i, final, tools)


def _read_named_json(buf: str, i: int, final: bool, tools: Tools | None) -> Step | None:
    """``NAME\\n{...}`` at ``buf[i:]``; anything else ends the region (it is the answer)."""
    name = _NAME.match(buf, i)
    if name is None:
        return Done(i)
    j = name.end()
    if j == len(buf):
        return None if not final else Done(i)
    if buf[j] == "\r":
        j += 1
    if j == len(buf):
        return None if not final else Done(i)
    if buf[j] != "\n":
        return Done(i)
    if tools is not None and tool_properties(tools, name.group()) is None:
        return Done(i)  # not one of the request's tools: a line of the answer
    k = j + 1
    while k < len(buf) and buf[k] in " \t\r\n":
        k += 1
    if k == len(buf):
        return None if not final else Done(i)
    if buf[k] != "{":
        return Done(i)
    end = scan_value(buf, k)
    if end is None:
        return None if not final else Bad(len(buf))
    try:
        arguments = json.loads(buf[k:end])
    except ValueError:
        return Bad(end)
    if not isinstance(arguments, dict):
        return Bad(end)
    return Found((Call(name.group(), json.dumps(arguments, ensure_ascii=False)),), end)


GLM4 = BlockCallFormat(name="glm4", openers=("<tool_call>",), at_start=True, reader=_read_glm4)
