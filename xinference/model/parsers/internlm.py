"""InternLM2.5 / InternLM3 tool calls: ``<|action_start|><|plugin|>\\n{"name": ..., "parameters": {...}}<|action_end|>``
per call (the ``<|interpreter|>`` action, code for a sandbox, is no function call and stays content)."""

from __future__ import annotations

from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["INTERNLM"]

INTERNLM = ToolCallFormat(
    name="internlm",
    openers=("<|action_start|><|plugin|>",),
    separators=("<|action_end|>",),
    argument_keys=("parameters", "arguments"),
    call_prefix="<|action_start|><|plugin|>\n",
    call_suffix="<|action_end|>",
)
