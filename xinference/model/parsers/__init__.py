"""Tool-call and reasoning parsers: pure functions over generated text, whole or streamed.

One module per tool-call format or family of formats (:mod:`.hermes`, :mod:`.llama3`, :mod:`.mistral`,
:mod:`.phi4`, :mod:`.internlm`, :mod:`.qwen3_coder`, :mod:`.glm`, :mod:`.deepseek`, :mod:`.kimi`,
:mod:`.pythonic`, :mod:`.gemma4`, :mod:`.harmony`), the shared machinery in :mod:`.tool_calls` (JSON calls) and
:mod:`.blocks` (everything else), raw argument values typed by the request's tools in :mod:`.arguments`, reasoning
tags in :mod:`.reasoning` (gpt-oss's channels in :mod:`.harmony`), the one table of formats in :mod:`.registry`,
and :mod:`.postprocess`, which engines that do not parse natively apply to their chat responses and chunks.
"""

from xinference.model.parsers.base import ParsedCall, ToolCallDelta
from xinference.model.parsers.reasoning import ReasoningStream, ReasoningTags, split_reasoning
from xinference.model.parsers.registry import (
    TOOL_CALL_FORMATS,
    get_tool_call_format,
    reasoning_tags_of,
    tool_call_format_of,
)
from xinference.model.parsers.tool_calls import ToolCallFormat, ToolCallStream, parse_tool_calls

__all__ = [
    "TOOL_CALL_FORMATS",
    "ParsedCall",
    "ReasoningStream",
    "ReasoningTags",
    "ToolCallDelta",
    "ToolCallFormat",
    "ToolCallStream",
    "get_tool_call_format",
    "parse_tool_calls",
    "reasoning_tags_of",
    "split_reasoning",
    "tool_call_format_of",
]
