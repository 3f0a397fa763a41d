"""DeepSeek's tool calls, in special-token sections (the bars and the low line are U+FF5C and U+2581)::

    deepseek_v3 (V3, R1, R1-0528):
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

    deepseek_v31 (V3.1, V3.1-Terminus, V3.2-Exp):
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>

    deepseek_v32 (V3.2): DSML, values raw unless string="false" (then JSON):
    <｜DSML｜function_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

Each reads the other V3 shapes too (a call's inner text tells which one it is), and ``deepseek_v32`` also reads the
V3.1 sections (V3.2 templates that still describe that format) and DSML written without the ``｜DSML｜`` prefix.
"""

from __future__ import annotations

import json
import re

from xinference.model.parsers.arguments import convert_value, tool_properties
from xinference.model.parsers.blocks import BlockCallFormat, Call, Done, InnerParser, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["DEEPSEEK_V3", "DEEPSEEK_V31", "DEEPSEEK_V32"]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"

_V3_BODY = re.compile(r"\s*([^\n]+?)\s*\n\s*```(?:json)?\s*\n?(.*?)\s*```\s*$", re.DOTALL)


def _json_arguments(text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None


def _parse_call(inner: str, tools: Tools | None) -> list[Call]:
    """``function<sep>NAME\\n```json ...```(V3) or ``NAME<sep>{...}`` (V3.1)."""
    kind, sep, rest = inner.partition(SEP)
    if not sep:
        return []
    v3 = _V3_BODY.match(rest) if kind.strip() == "function" else None
    if v3 is not None:
        name, arguments = v3.group(1).strip(), _json_arguments(v3.group(2))
    else:
        name, arguments = kind.strip(), _json_arguments(rest.strip())
    if not name or arguments is None:
        return []
    return [Call(name, arguments)]


def _read_sections(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(
        buf, final, tools, begin=CALL_BEGIN, end=CALL_END, parse=_parse_call, skips=(CALLS_BEGIN, CALLS_END)
    )


DEEPSEEK_V3 = BlockCallFormat(name="deepseek_v3", openers=(CALLS_BEGIN, CALL_BEGIN), reader=_read_sections)
DEEPSEEK_V31 = BlockCallFormat(name="deepseek_v31", openers=(CALLS_BEGIN, CALL_BEGIN), reader=_read_sections)

_DSML = "｜DSML｜"
_INVOKE_NAME = re.compile(r'\s+name="([^"]+)"\s*>')


def _dsml_parser(prefix: str) -> tuple[str, str, str, str, re.Pattern[str]]:
    parameter = re.compile(
        rf'<{prefix}parameter\s+name="([^"]+)"(?:\s+string="(true|false)")?\s*>(.*?)</{prefix}parameter>', re.DOTALL
    )
    return (
        f"<{prefix}function_calls>",
        f"</{prefix}function_calls>",
        f"<{prefix}invoke",
        f"</{prefix}invoke>",
        parameter,
    )


def _invoke_parser(parameter: re.Pattern[str]) -> InnerParser:
    def parse(inner: str, tools: Tools | None) -> list[Call]:
        head = _INVOKE_NAME.match(inner)
        if head is None:
            return []
        name = head.group(1)
        properties = tool_properties(tools, name)
        arguments = {}
        for key, string, raw in parameter.findall(inner[head.end() :]):
            if string == "true":
                arguments[key] = raw
            else:
                schema = (properties or {}).get(key) if properties is not None else None
                arguments[key] = convert_value(raw, schema)
        return [Call(name, json.dumps(arguments, ensure_ascii=False))]

    return parse


_DSML_SHAPES = [_dsml_parser(_DSML), _dsml_parser("")]
_DSML_READERS = [(opener, closer, begin, end, _invoke_parser(p)) for opener, closer, begin, end, p in _DSML_SHAPES]


def _closed(inner: str) -> bool:
    return inner.rstrip().endswith("parameter>")


def _read_v32(buf: str, final: bool, tools: Tools | None) -> Step | None:
    head = buf.lstrip()
    for opener, closer, begin, end, parse in _DSML_READERS:
        if head.startswith((opener, closer, begin)):
            return read_block(
                buf, final, tools, begin=begin, end=end, parse=parse, skips=(opener, closer), cut_ok=_closed
            )
    if head.startswith((CALLS_BEGIN, CALLS_END, CALL_BEGIN)):
        return _read_sections(buf, final, tools)
    markers = [m for shape in _DSML_READERS for m in shape[:3]] + [CALLS_BEGIN, CALLS_END, CALL_BEGIN]
    if not final and (not head or any(m.startswith(head) for m in markers)):
        return None
    return Done(len(buf) - len(head))


DEEPSEEK_V32 = BlockCallFormat(
    name="deepseek_v32",
    openers=(f"<{_DSML}function_calls>", "<function_calls>", CALLS_BEGIN, CALL_BEGIN),
    reader=_read_v32,
)
