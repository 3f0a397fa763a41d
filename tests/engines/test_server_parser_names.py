"""The tool-call and reasoning parsers vLLM and SGLang are started with, for every family of the catalog.

A family names its tool-call format by any accepted alias (Xinference's ``qwen``, vLLM's ``glm47``...); the server
must get the parser of the format the alias means, and every reasoning family a reasoning parser that knows its
tags. The parser names are those of vLLM 0.32's ``vllm/tool_parsers`` and ``vllm/reasoning`` registries.
"""

from __future__ import annotations

import pytest

from xinference.engines.managed.engine import reasoning_style, tool_format_name
from xinference.engines.sglang import engine as sglang
from xinference.engines.vllm import engine as vllm
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

#: formats no vLLM parser reads (tool_choice "auto" is refused with a reason on vLLM for these)
NO_VLLM_PARSER = {"glm4", "gemma3"}


def _family(**fields: object) -> ModelFamily:
    base: dict[str, object] = {
        "model_name": "probe",
        "model_ability": ["chat", "tools"],
        "model_specs": [
            {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": "a/b"}
        ],
    }
    return ModelFamily.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("declared", "vllm_name", "sglang_name"),
    [
        ("qwen", "hermes", "qwen25"),
        ("hermes", "hermes", "qwen25"),
        ("glm47", "glm45", "glm"),
        ("deepseek-v3.1", "deepseek_v31", "deepseekv31"),
        ("gpt-oss", "openai", "gpt-oss"),
        ("llama3.1", "llama3_json", "llama3"),
    ],
)
def test_an_alias_starts_the_server_with_its_formats_parser(declared: str, vllm_name: str, sglang_name: str) -> None:
    name = tool_format_name(_family(tool_call_format=declared))
    assert name is not None
    assert vllm.TOOL_PARSERS[name] == vllm_name
    assert sglang.TOOL_PARSERS[name] == sglang_name


@pytest.mark.parametrize(
    ("tags", "name", "style"),
    [
        (None, "phi-like", "think"),  # a reasoning family without tags thinks in <think>
        (("<think>", "</think>"), "qwen3-probe", "qwen3"),
        (("[THINK]", "[/THINK]"), "probe", "mistral"),
        (("<|channel|>analysis<|message|>", "<|end|>"), "probe", "harmony"),
        (("<b>", "</b>"), "probe", None),  # tags no server knows: the platform splits them itself
    ],
)
def test_reasoning_style_follows_the_tags(tags: tuple[str, str] | None, name: str, style: str | None) -> None:
    fields: dict[str, object] = {"model_name": name, "model_ability": ["chat", "reasoning"]}
    if tags:
        fields |= {"reasoning_start_tag": tags[0], "reasoning_end_tag": tags[1]}
    assert reasoning_style(_family(**fields)) == style


def test_every_catalog_family_gets_vllm_parsers_for_what_it_declares() -> None:
    missing = []
    for family in ModelRegistry().list("LLM"):
        fmt = tool_format_name(family)
        if fmt and fmt not in vllm.TOOL_PARSERS and fmt not in NO_VLLM_PARSER:
            missing.append(f"{family.model_name}: tools {fmt}")
        if "reasoning" in family.model_ability and reasoning_style(family) not in vllm.REASONING_PARSERS:
            missing.append(f"{family.model_name}: reasoning {reasoning_style(family)}")
    assert not missing, missing
