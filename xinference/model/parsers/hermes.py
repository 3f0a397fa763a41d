"""Hermes / Qwen tool calls: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, one block per call.

Written by Qwen2.5, Qwen3, QwQ, Hermes 2/3 and many fine-tunes that reuse their chat template.
"""

from __future__ import annotations

from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["HERMES"]

HERMES = ToolCallFormat(
    name="hermes",
    openers=("<tool_call>",),
    separators=("</tool_call>",),
    call_prefix="<tool_call>\n",
    call_suffix="\n</tool_call>",
)
