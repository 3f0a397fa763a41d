"""Xinference's audio registration JSON (flat: one model per entry, no ``model_specs``) accepted verbatim: the
entries of its own ``model_spec.json`` and a custom registration of local weights."""

from __future__ import annotations

import pytest

from xinference.errors import InvalidRequest
from xinference.model.custom import from_xinference_json
from xinference.model.spec import ModelFamily

# As Xinference's xinference/model/audio/model_spec.json writes the entry (its fields, verbatim)
XINFERENCE_WHISPER = {
    "version": 2,
    "model_name": "whisper-tiny.en",
    "model_family": "whisper",
    "engine": "transformers",
    "model_format": "pytorch",
    "model_ability": ["audio2text"],
    "multilingual": False,
    "model_src": {
        "huggingface": {
            "model_id": "openai/whisper-tiny.en",
            "model_revision": "87c7102498dcde7456f24cfd30239ca606ed9063",
        }
    },
    "updated_at": 1786790280,
    "featured": False,
    "virtualenv": {"packages": ["transformers", "accelerate", "#system_torch#", "#system_numpy#"]},
}


def _family(data: dict, kind: str = "audio") -> ModelFamily:
    return ModelFamily.model_validate(from_xinference_json({"model_type": kind, **data}, kind))


def test_a_builtin_entry_of_xinference_becomes_one_family_with_one_spec() -> None:
    family = _family({**XINFERENCE_WHISPER, "model_name": "my-whisper"})
    assert family.model_type == "audio" and family.model_ability == ["audio2text"] and family.multilingual is False
    (spec,) = family.model_specs
    assert (spec.model_format, spec.quantizations, spec.model_id) == ("pytorch", ["none"], "openai/whisper-tiny.en")
    assert spec.model_revision == "87c7102498dcde7456f24cfd30239ca606ed9063"
    assert family.kept_fields["engine"] == "transformers" and family.kept_fields["model_family"] == "whisper"
    assert family.kept_fields["virtualenv"]["packages"][0] == "transformers"


def test_a_custom_registration_with_local_weights_and_no_ability() -> None:
    data = {
        "version": 2,
        "model_name": "my-ct2-whisper",
        "model_family": "whisper",
        "model_id": None,
        "model_revision": None,
        "model_uri": "/data/whisper-ct2",
        "model_format": "ctranslate2",
        "multilingual": True,
        "language": "en",
    }
    family = _family(data)
    assert family.model_ability == ["audio2text"] and family.model_lang == ["en"]
    assert family.model_specs[0].model_uri == "file:///data/whisper-ct2"
    assert family.model_specs[0].model_format == "ctranslate2"


def test_modelscope_sources_and_unknown_hubs() -> None:
    family = _family(
        {
            **XINFERENCE_WHISPER,
            "model_name": "w3",
            "model_src": {
                "huggingface": {"model_id": "openai/whisper-large-v3"},
                "modelscope": {"model_id": "AI-ModelScope/whisper-large-v3", "model_revision": "master"},
            },
        }
    )
    assert family.model_specs[0].model_hub_ids["modelscope"] == "AI-ModelScope/whisper-large-v3"
    with pytest.raises(InvalidRequest, match="model_src"):
        _family({**XINFERENCE_WHISPER, "model_src": {"elsewhere": {"model_id": "a/b"}}})


def test_an_unknown_field_is_still_refused_by_name() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        _family({**XINFERENCE_WHISPER, "sample_rate": 16000})
