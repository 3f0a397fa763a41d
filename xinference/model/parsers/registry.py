"""The one table of tool-call formats, and how a model family picks its parsers.

A family names its format in its JSON entry (``tool_call_format``, or Xinference's ``tool_parser``) and declares
its reasoning tags (``reasoning_start_tag`` / ``reasoning_end_tag``; a family with the ``reasoning`` ability and no
tags gets ``<think>``/``</think>``; ``reasoning_starts_inside`` when its template opens the block in the prompt).
Names are looked up case-insensitively; Xinference's, vLLM's and SGLang's parser names are aliases of the formats
they read.

The formats: ``hermes`` (Qwen2.5/Qwen3, Hermes), ``llama3_json``, ``mistral``, ``qwen3_coder`` (Qwen3-Coder's
XML), ``glm45`` (GLM-4.5 to 5), ``glm4`` (GLM-4-9B-chat, GLM-4-0414), ``deepseek_v3`` / ``deepseek_v31`` /
``deepseek_v32``, ``kimi_k2``, ``pythonic`` (Llama 3.2/4), ``gemma3`` (``tool_code`` blocks), ``gemma4``,
``phi4_mini_json``, ``internlm`` and ``harmony`` (gpt-oss; its reasoning is the analysis channel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xinference.model.parsers.deepseek import DEEPSEEK_V3, DEEPSEEK_V31, DEEPSEEK_V32
from xinference.model.parsers.gemma4 import GEMMA4
from xinference.model.parsers.glm import GLM4, GLM45
from xinference.model.parsers.harmony import HARMONY, HARMONY_CALLS
from xinference.model.parsers.hermes import HERMES
from xinference.model.parsers.internlm import INTERNLM
from xinference.model.parsers.kimi import KIMI_K2
from xinference.model.parsers.llama3 import LLAMA3_JSON
from xinference.model.parsers.mistral import MISTRAL
from xinference.model.parsers.phi4 import PHI4_MINI_JSON
from xinference.model.parsers.pythonic import GEMMA3, PYTHONIC
from xinference.model.parsers.qwen3_coder import QWEN3_CODER
from xinference.model.parsers.reasoning import ReasoningTags
from xinference.model.parsers.tool_calls import ToolCallFormat

if TYPE_CHECKING:
    from xinference.model.spec import ModelFamily

__all__ = [
    "FORMATS",
    "TOOL_CALL_FORMATS",
    "get_tool_call_format",
    "reasoning_starts_inside",
    "reasoning_tags_of",
    "tool_call_format_of",
]

#: every format under its own name
FORMATS: tuple[ToolCallFormat, ...] = (
    HERMES,
    LLAMA3_JSON,
    MISTRAL,
    QWEN3_CODER,
    GLM45,
    GLM4,
    DEEPSEEK_V3,
    DEEPSEEK_V31,
    DEEPSEEK_V32,
    KIMI_K2,
    PYTHONIC,
    GEMMA3,
    GEMMA4,
    PHI4_MINI_JSON,
    INTERNLM,
    HARMONY_CALLS,
)

#: other names of the formats: Xinference's ``tool_parser`` values, vLLM's and SGLang's ``--tool-call-parser``
_ALIASES: dict[str, ToolCallFormat] = {
    # Xinference
    "qwen": HERMES,
    "qwen2.5": HERMES,
    "qwen3": HERMES,
    "llama3": LLAMA3_JSON,
    "llama3.1": LLAMA3_JSON,
    "glm5": GLM45,
    "deepseek-v3": DEEPSEEK_V3,
    "deepseek-r1": DEEPSEEK_V3,
    "deepseek-v3.1": DEEPSEEK_V31,
    "deepseek-v3.2": DEEPSEEK_V32,
    "gemma": GEMMA4,
    "qwen_xml": QWEN3_CODER,
    # vLLM
    "qwen3_xml": QWEN3_CODER,
    "glm47": GLM45,
    "llama4_pythonic": PYTHONIC,
    "openai": HARMONY_CALLS,
    "internlm2": INTERNLM,
    # SGLang
    "qwen25": HERMES,
    "glm": GLM45,
    "deepseekv3": DEEPSEEK_V3,
    "deepseekv31": DEEPSEEK_V31,
    "deepseekv32": DEEPSEEK_V32,
    "gpt-oss": HARMONY_CALLS,
    "gpt_oss": HARMONY_CALLS,
}

#: format name (and accepted aliases) -> format
TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {**{fmt.name: fmt for fmt in FORMATS}, **_ALIASES}


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
    """The family's reasoning tags: declared ones, ``<think>`` for a ``reasoning`` family, else None.

    Harmony's analysis-channel header with ``<|end|>`` (gpt-oss) selects the harmony channel splitter.
    """
    start, end = family.reasoning_start_tag, family.reasoning_end_tag
    if start and end:
        return HARMONY if (start, end) == (HARMONY.start, HARMONY.end) else ReasoningTags(start, end)
    if "reasoning" in family.model_ability:
        return ReasoningTags()
    return None


def reasoning_starts_inside(family: ModelFamily) -> bool:
    """Whether the family's template opens the reasoning block in the prompt (the reply starts inside it)."""
    return bool(getattr(family, "reasoning_starts_inside", False))
