"""The one table of tool-call formats, and how a model family picks its parsers.

A family names its format in its JSON entry (``tool_call_format``, or Xinference's ``tool_parser``) and declares
its reasoning tags (``reasoning_start_tag`` / ``reasoning_end_tag``; a family with the ``reasoning`` ability and no
tags gets ``<think>``/``</think>``). Names are looked up case-insensitively; Xinference's own parser names are
aliases of the formats they write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xinference.model.parsers.hermes import HERMES
from xinference.model.parsers.llama3 import LLAMA3_JSON
from xinference.model.parsers.mistral import MISTRAL
from xinference.model.parsers.reasoning import ReasoningTags
from xinference.model.parsers.tool_calls import ToolCallFormat

if TYPE_CHECKING:
    from xinference.model.spec import ModelFamily

__all__ = ["TOOL_CALL_FORMATS", "get_tool_call_format", "reasoning_tags_of", "tool_call_format_of"]

#: format name (and accepted aliases) -> format
TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {
    "hermes": HERMES,
    "qwen": HERMES,
    "qwen2.5": HERMES,
    "qwen3": HERMES,
    "llama3_json": LLAMA3_JSON,
    "llama3": LLAMA3_JSON,
    "llama3.1": LLAMA3_JSON,
    "mistral": MISTRAL,
}


def get_tool_call_format(name: str) -> ToolCallFormat:
    """The format called ``name``; ValueError listing the known names otherwise (used by the family schema)."""
    fmt = TOOL_CALL_FORMATS.get(name.lower())
    if fmt is None:
        raise ValueError(f"unknown tool call format {name!r}; known: {', '.join(sorted(TOOL_CALL_FORMATS))}")
    return fmt


def tool_call_format_of(family: ModelFamily) -> ToolCallFormat | None:
    """The family's declared tool-call format, or None."""
    name = family.tool_call_format
    return get_tool_call_format(name) if name else None


def reasoning_tags_of(family: ModelFamily) -> ReasoningTags | None:
    """The family's reasoning tags: declared ones, ``<think>`` for a ``reasoning`` family, else None."""
    start, end = family.reasoning_start_tag, family.reasoning_end_tag
    if start and end:
        return ReasoningTags(start, end)
    if "reasoning" in family.model_ability:
        return ReasoningTags()
    return None
