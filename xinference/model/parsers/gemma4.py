"""Gemma 4's tool calls: its own tokens and a JSON-like syntax with bare keys and ``<|"|>`` around strings::

    <|tool_call>call:get_weather{location:<|"|>Tokyo<|"|>,days:3,opts:{metric:true},tags:[<|"|>a<|"|>]}<tool_call|>

Calls follow each other without separators. Bare values are ``true``, ``false``, ``null`` and numbers; anything
else bare is kept as a string.
"""

from __future__ import annotations

import json
from typing import Any

from xinference.model.parsers.blocks import BlockCallFormat, Call, Step, read_block
from xinference.model.parsers.tool_calls import Tools

__all__ = ["GEMMA4", "parse_gemma4_value"]

CALL_BEGIN = "<|tool_call>"
CALL_END = "<tool_call|>"
QUOTE = '<|"|>'


class _Malformed(ValueError):
    pass


class _Reader:
    """Recursive descent over one argument object (bounded by the text: every step consumes characters)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def blanks(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t\r\n":
            self.i += 1

    def value(self, depth: int = 0) -> Any:
        if depth > 64:
            raise _Malformed("too deep")
        self.blanks()
        text = self.text
        if text.startswith(QUOTE, self.i):
            end = text.find(QUOTE, self.i + len(QUOTE))
            if end < 0:
                raise _Malformed("open string")
            value = text[self.i + len(QUOTE) : end]
            self.i = end + len(QUOTE)
            return value
        if self.i < len(text) and text[self.i] == "{":
            return self.mapping(depth)
        if self.i < len(text) and text[self.i] == "[":
            self.i += 1
            items: list[Any] = []
            while True:
                self.blanks()
                if self.i < len(text) and text[self.i] == "]":
                    self.i += 1
                    return items
                items.append(self.value(depth + 1))
                self.blanks()
                if self.i < len(text) and text[self.i] == ",":
                    self.i += 1
                elif not (self.i < len(text) and text[self.i] == "]"):
                    raise _Malformed("array")
        start = self.i
        while self.i < len(text) and text[self.i] not in ",}]":
            self.i += 1
        return _bare(text[start : self.i].strip())

    def mapping(self, depth: int) -> dict[str, Any]:
        text = self.text
        if not (self.i < len(text) and text[self.i] == "{"):
            raise _Malformed("object expected")
        self.i += 1
        result: dict[str, Any] = {}
        while True:
            self.blanks()
            if self.i < len(text) and text[self.i] == "}":
                self.i += 1
                return result
            if text.startswith(QUOTE, self.i):
                key = self.value(depth + 1)
            else:
                colon = text.find(":", self.i)
                if colon < 0:
                    raise _Malformed("key")
                key = text[self.i : colon].strip()
                self.i = colon
            self.blanks()
            if not (self.i < len(text) and text[self.i] == ":") or not key:
                raise _Malformed("colon")
            self.i += 1
            result[str(key)] = self.value(depth + 1)
            self.blanks()
            if self.i < len(text) and text[self.i] == ",":
                self.i += 1
            elif not (self.i < len(text) and text[self.i] == "}"):
                raise _Malformed("object")


def _bare(token: str) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token in ("null", "none", "None"):
        return None
    try:
        return int(token)
    except ValueError:
        pass
    try:
        number = float(token)
    except ValueError:
        return token
    return number if number == number and abs(number) != float("inf") else token


def parse_gemma4_value(text: str) -> Any:
    """The value of one Gemma 4 argument object ``{...}`` (ValueError when malformed)."""
    reader = _Reader(text)
    value = reader.mapping(0)
    reader.blanks()
    if reader.i != len(text):
        raise _Malformed("trailing text")
    return value


def _parse(inner: str, tools: Tools | None) -> list[Call]:
    text = inner.strip()
    if not text.startswith("call:"):
        return []
    brace = text.find("{")
    name = (text[5:] if brace < 0 else text[5:brace]).strip()
    if not name or any(ch in name for ch in " \t\n<>:"):
        return []
    try:
        arguments = parse_gemma4_value(text[brace:]) if brace >= 0 else {}
    except ValueError:
        return []
    return [Call(name, json.dumps(arguments, ensure_ascii=False))]


def _read(buf: str, final: bool, tools: Tools | None) -> Step | None:
    return read_block(buf, final, tools, begin=CALL_BEGIN, end=CALL_END, parse=_parse)


GEMMA4 = BlockCallFormat(name="gemma4", openers=(CALL_BEGIN,), reader=_read)
