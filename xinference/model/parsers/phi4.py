"""Phi-4-mini's JSON tool calls: ``<|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>`` (its
special tokens), or ``functools[{...}, ...]`` as vLLM's Phi-4-mini template asks."""

from __future__ import annotations

from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["PHI4_MINI_JSON"]

PHI4_MINI_JSON = ToolCallFormat(
    name="phi4_mini_json",
    openers=("<|tool_call|>", "functools"),
    separators=("[", ",", "]", "<|/tool_call|>", "</|tool_call|>"),
    call_prefix="<|tool_call|>[",
    call_suffix="]<|/tool_call|>",
)
