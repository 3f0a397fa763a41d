"""Rules every built-in family keeps because the download path and the parsers depend on them.

- A non-GGUF spec is one repository, so it names one quantization: ``model_id`` has no ``{quantization}`` slot
  (Xinference's ``mlx-community/X-{quantization}`` entries become one spec per repository here).
- A hub GGUF spec is fetched as one file (``model/download.py``), so its template never names a split part.
- ``tools`` is in the abilities exactly when a tool-call format is declared, and reasoning tags only come with the
  ``reasoning`` ability: the API offers tools and splits reasoning from what the family declares.
"""

from __future__ import annotations

import re

import pytest

from xinference.model.parsers.registry import reasoning_tags_of, tool_call_format_of
from xinference.model.registry import ModelRegistry, load_builtin_families
from xinference.model.spec import ModelFamily

_SPLIT_PART = re.compile(r"\d{5}-of-\d{5}")


def _families() -> list[ModelFamily]:
    return load_builtin_families()


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry()


def test_a_non_gguf_spec_names_exactly_one_quantization() -> None:
    wrong = [
        f"{family.model_name} {spec.model_format} {spec.size}: {spec.quantizations}"
        for family in _families()
        for spec in family.model_specs
        if spec.model_format != "ggufv2" and len(spec.quantizations) != 1
    ]
    assert wrong == []


def test_hub_gguf_templates_name_single_files() -> None:
    split = [
        f"{family.model_name} {spec.size}: {spec.model_file_name_template}"
        for family in _families()
        for spec in family.model_specs
        if spec.model_file_name_template and _SPLIT_PART.search(spec.model_file_name_template)
    ]
    assert split == []


def test_tools_ability_goes_with_a_tool_call_format() -> None:
    mismatched = [
        f"{family.model_name}: tools={'tools' in family.model_ability}, format={family.tool_call_format}"
        for family in _families()
        if ("tools" in family.model_ability) != (family.tool_call_format is not None)
    ]
    assert mismatched == []


def test_reasoning_tags_come_with_the_reasoning_ability() -> None:
    stray = [
        family.model_name
        for family in _families()
        if family.reasoning_start_tag is not None and "reasoning" not in family.model_ability
    ]
    assert stray == []


def test_parsers_follow_what_the_families_declare(registry: ModelRegistry) -> None:
    # Magistral 1.2 writes its reasoning between control tokens, not <think>
    tags = reasoning_tags_of(registry.get("magistral-small-2509"))
    assert tags is not None and (tags.start, tags.end) == ("[THINK]", "[/THINK]")
    # Phi-4-reasoning keeps the default <think> pair
    tags = reasoning_tags_of(registry.get("phi-4-reasoning"))
    assert tags is not None and (tags.start, tags.end) == ("<think>", "</think>")
    # gpt-oss speaks harmony: reasoning on the analysis channel, calls as commentary messages to functions.NAME
    gpt_oss = registry.get("gpt-oss")
    tags = reasoning_tags_of(gpt_oss)
    assert tags is not None and (tags.start, tags.end) == ("<|channel|>analysis<|message|>", "<|end|>")
    calls = tool_call_format_of(gpt_oss)
    assert calls is not None and calls.name == "harmony"
    # families without a tool format do not offer tools
    for name in ("gemma-2-it", "phi-4", "llama-3-instruct", "granite-3.3-instruct"):
        family = registry.get(name)
        assert tool_call_format_of(family) is None and "tools" not in family.model_ability
    declared = {
        "llama-3.3-instruct": "llama3_json",
        "llama-4-scout-instruct": "pythonic",
        "mistral-small-3.2-instruct": "mistral",
        "phi-4-mini-instruct": "phi4_mini_json",
        "gemma-4": "gemma4",
        "hermes-3-llama-3.1": "hermes",
        "smollm3": "hermes",
    }
    for name, fmt in declared.items():
        calls = tool_call_format_of(registry.get(name))
        assert calls is not None and calls.name == fmt, name
