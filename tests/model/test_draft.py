"""Draft models planned at launch (model/draft.py): found in the catalog, refused with the reason, never dropped."""

from __future__ import annotations

import pytest

from xinference.engines.llama_cpp.config import LlamaCppConfig
from xinference.engines.transformers.config import TransformersConfig
from xinference.errors import InvalidRequest
from xinference.model.draft import attach_draft, engine_takes_draft, plan_draft
from xinference.model.registry import ModelRegistry, SpecChoice
from xinference.model.spec import ModelFamily


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    return ModelRegistry()


def choice(registry: ModelRegistry, name: str, fmt: str, size: str) -> SpecChoice:
    return registry.choices(registry.get(name), fmt, size)[0]


def test_no_draft_fields_leave_the_options_alone(registry: ModelRegistry) -> None:
    target = choice(registry, "smollm2-instruct", "ggufv2", "1_7")
    assert plan_draft(registry, target, "llama.cpp", LlamaCppConfig, {"n_ctx": 512}) == ({"n_ctx": 512}, None)
    assert plan_draft(registry, target, "llama.cpp", LlamaCppConfig, {"enable_mtp": "false"}) == ({}, None)


def test_enable_mtp_finds_the_catalog_draft(registry: ModelRegistry) -> None:
    target = choice(registry, "smollm2-instruct", "ggufv2", "1_7")
    options, draft = plan_draft(registry, target, "llama.cpp", LlamaCppConfig, {"enable_mtp": True, "n_ctx": 512})
    assert options == {"n_ctx": 512}  # a launch field, never an engine option
    assert draft is not None and draft["source"] == "catalog" and draft["kind"] == "draft"
    assert draft["name"] == "smollm2-instruct 0_135 ggufv2 Q4_1" and draft["spec"]["bundled"] is not None
    # fetched like any weights, in the model process: here the bundled GGUF
    attached = attach_draft(draft)
    assert attached.path.endswith(".gguf") and attached.source == "catalog"


def test_draft_model_path_overrides_the_catalog(registry: ModelRegistry, tmp_path) -> None:
    target = choice(registry, "smollm2-instruct", "ggufv2", "1_7")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "mine.gguf").write_bytes(b"GGUF")
    _, draft = plan_draft(
        registry, target, "llama.cpp", LlamaCppConfig, {"enable_mtp": True, "draft_model_path": str(tmp_path)}
    )
    assert draft is not None and draft["source"] == "user"
    assert attach_draft(draft).path == str(tmp_path / "nested" / "mine.gguf")  # the one GGUF in the folder


@pytest.mark.parametrize(
    ("engine", "config", "name", "fmt", "size", "kwargs", "needle", "param"),
    [
        (
            "llama.cpp",
            LlamaCppConfig,
            "smollm2-instruct",
            "ggufv2",
            "0_135",
            {"enable_mtp": True},
            "declares no draft model",
            "enable_mtp",
        ),
        (
            "Transformers",
            TransformersConfig,
            "smollm2-instruct",
            "pytorch",
            "1_7",
            {"enable_mtp": True},
            "Transformers cannot attach a draft model",
            "enable_mtp",
        ),
        (
            "llama.cpp",
            LlamaCppConfig,
            "smollm2-instruct",
            "ggufv2",
            "1_7",
            {"draft_model_path": "drafts/x.gguf"},
            "must be an absolute path",
            "draft_model_path",
        ),
        (
            "llama.cpp",
            LlamaCppConfig,
            "smollm2-instruct",
            "ggufv2",
            "1_7",
            {"enable_mtp": "sometimes"},
            "enable_mtp must be true or false",
            "enable_mtp",
        ),
        (
            "llama.cpp",
            LlamaCppConfig,
            "smollm2-instruct",
            "ggufv2",
            "1_7",
            {"draft": {"path": "/x.gguf"}},
            "draft is set by the platform",
            "draft",
        ),
    ],
)
def test_refusals_name_the_field(
    registry: ModelRegistry,
    engine: str,
    config: type,
    name: str,
    fmt: str,
    size: str,
    kwargs: dict,
    needle: str,
    param: str,
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        plan_draft(registry, choice(registry, name, fmt, size), engine, config, kwargs)
    assert needle in caught.value.message and caught.value.param == param


def _with_draft(registry: ModelRegistry, size: str, draft: dict) -> SpecChoice:
    base = registry.get("smollm2-instruct").model_dump()
    spec = {**base["model_specs"][0], "model_size_in_billions": size, "draft_model": draft}
    family = ModelFamily.model_validate({**base, "model_name": "custom-target", "model_specs": [spec]})
    return SpecChoice(family, family.model_specs[0], "Q4_1")


@pytest.mark.parametrize(
    ("size", "draft", "needle"),
    [
        ("0_1", {"model_name": "smollm2-instruct", "model_size_in_billions": "0_135"}, "is not smaller than"),
        (
            "1",
            {"model_name": "smollm2-instruct", "model_size_in_billions": "0_135", "model_format": "pytorch"},
            "ships as pytorch, but the target runs as ggufv2",
        ),
        ("1", {"model_name": "no-such-model", "model_size_in_billions": "0_1"}, "is not in the catalog"),
        ("1", {"model_name": "smollm2-instruct", "model_size_in_billions": "0_5"}, "is not available"),
    ],
)
def test_a_declared_draft_that_cannot_serve_is_refused(
    registry: ModelRegistry, size: str, draft: dict, needle: str
) -> None:
    with pytest.raises(InvalidRequest, match=needle):
        plan_draft(registry, _with_draft(registry, size, draft), "llama.cpp", LlamaCppConfig, {"enable_mtp": True})


def test_engines_say_whether_they_take_a_draft() -> None:
    assert engine_takes_draft(LlamaCppConfig) and not engine_takes_draft(TransformersConfig)
