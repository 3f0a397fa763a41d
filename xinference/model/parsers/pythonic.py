"""Calls written as Python: ``[get_weather(city="SF"), get_time(tz="PST")]``.

- ``pythonic`` (Llama 3.2 and Llama 4 with their pythonic templates, many small models): the message *is* the
  list, optionally between Llama 4's ``<|python_start|>`` and ``<|python_end|>``; a message that opens with other
  text is the answer.
- ``gemma3`` (Gemma 3, which has no tool tokens; its prompts ask for a ``tool_code`` block): calls in a
  ```` ```tool_code ```` fence, as a list or one call per line, optionally wrapped in ``print(...)``.

The text is read with :mod:`ast` and only literals are accepted as values (``ast.literal_eval`` on each keyword):
nothing the model writes is ever evaluated. Positional arguments, names and expressions make it not a call.
"""

from __future__ import annotations

import ast
import json

from xinference.model.parsers.blocks import Bad, BlockCallFormat, Call, Done, Found, Skip, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["GEMMA3", "PYTHONIC", "parse_python_calls", "scan_python_list"]

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"


def _call(node: ast.expr) -> Call | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
        if len(node.args) == 1 and not node.keywords:
            return _call(node.args[0])
    if not isinstance(node, ast.Call) or node.args:
        return None
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.insert(0, func.id)
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):  # a set, bytes, complex...: no JSON for it
        return None
    return Call(".".join(parts), text)


def parse_python_calls(source: str, tools: Tools | None = None) -> list[Call]:
    """The calls of ``source``: one list of calls, or call statements (one per line); empty if anything else."""
    try:
        tree = ast.parse(source.strip())
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    nodes: list[ast.expr] = []
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            return []
        value = statement.value
        nodes.extend(value.elts if isinstance(value, ast.List) else [value])
    calls = [_call(node) for node in nodes]
    if not calls or any(call is None for call in calls):
        return []
    return [call for call in calls if call is not None]


def scan_python_list(text: str, start: int) -> int | None:
    """End (exclusive) of the bracketed expression opening at ``text[start]``; None while it is open.

    Follows brackets and Python string literals (quotes, triple quotes, escapes)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else ch
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                return None
            i += len(quote)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _read_pythonic(buf: str, final: bool, tools: Tools | None) -> Step | None:
    i = len(buf) - len(buf.lstrip())
    rest = buf[i:]
    if not rest:
        return Done(i) if final else None
    for marker in (PYTHON_START, PYTHON_END):
        if rest.startswith(marker):
            return Skip(i + len(marker))
        if not final and marker.startswith(rest):
            return None
    if rest[0] != "[":
        return Done(i)
    end = scan_python_list(buf, i)
    if end is None:
        return None if not final else Bad(len(buf))
    calls = parse_python_calls(buf[i:end])
    return Found(tuple(calls), end) if calls else Bad(end)


PYTHONIC = BlockCallFormat(name="pythonic", openers=(PYTHON_START,), at_start=True, reader=_read_pythonic)

_TOOL_CODE = "```tool_code"


def _read_gemma3(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(buf, final, tools, begin=_TOOL_CODE, end="```", parse=parse_python_calls)


GEMMA3 = BlockCallFormat(name="gemma3", openers=(_TOOL_CODE,), reader=_read_gemma3)
