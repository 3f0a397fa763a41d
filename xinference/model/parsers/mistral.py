"""Mistral tool calls (v0.3 tokenizer): ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``."""

from __future__ import annotations

from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["MISTRAL"]

MISTRAL = ToolCallFormat(
    name="mistral",
    openers=("[TOOL_CALLS]",),
    separators=("[", ",", "]"),
    call_prefix="[TOOL_CALLS][",
    call_suffix="]",
)
