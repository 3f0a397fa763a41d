"""Multimodal projectors of GGUF vision models (issue 22): the spec field, the launch's choice, the file's place."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tests.model.fake_hub import FakeHub
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.custom import from_xinference_json
from xinference.model.projector import plan_projector, resolve_projector
from xinference.model.registry import SpecChoice
from xinference.model.spec import ModelFamily, ModelSpec

REPO = "fake-org/tiny-vl-GGUF"
PROJECTORS = ["mmproj-tiny-f16.gguf", "mmproj-tiny-f32.gguf"]


class TakesProjector(BaseModel):
    """Stand-in for an engine config with a ``projector`` option (llama.cpp's has one)."""

    projector: str | None = None


class NoProjector(BaseModel):
    """Stand-in for an engine config without one (vLLM's, Transformers')."""


def gguf_spec(**extra: Any) -> dict[str, Any]:
    return {
        "model_format": "ggufv2",
        "model_size_in_billions": 1,
        "quantizations": ["Q4_K_M"],
        "model_id": REPO,
        "model_file_name_template": "tiny-vl-{quantization}.gguf",
        "multimodal_projectors": list(PROJECTORS),
        **extra,
    }


def choice(abilities: tuple[str, ...] = ("chat", "vision"), **spec: Any) -> SpecChoice:
    family = ModelFamily.model_validate(
        {"model_name": "tiny-vl", "model_ability": list(abilities), "model_specs": [gguf_spec(**spec)]}
    )
    return SpecChoice(family, family.model_specs[0], "Q4_K_M")


# -- the spec ------------------------------------------------------------------------------------------------------
def test_specs_list_projector_files_of_gguf_weights_only() -> None:
    assert ModelSpec.model_validate(gguf_spec()).multimodal_projectors == PROJECTORS
    with pytest.raises(ValidationError, match="only a ggufv2 spec"):
        ModelSpec.model_validate(
            {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": REPO}
            | {"multimodal_projectors": ["mmproj.gguf"]}
        )
    for bad in ("../mmproj.gguf", "", "a\\b.gguf"):
        with pytest.raises(ValidationError, match="not a projector file name"):
            ModelSpec.model_validate(gguf_spec(multimodal_projectors=[bad]))
    with pytest.raises(ValidationError, match="twice"):
        ModelSpec.model_validate(gguf_spec(multimodal_projectors=["a.gguf", "a.gguf"]))
    with pytest.raises(ValidationError, match="need a local spec"):
        ModelSpec.model_validate(gguf_spec(multimodal_projectors=["/models/mmproj.gguf"]))
    local = gguf_spec(model_id=None, model_uri="file:///models/vl.gguf", multimodal_projectors=["/models/mm.gguf"])
    assert ModelSpec.model_validate(local).multimodal_projectors == ["/models/mm.gguf"]


def test_xinference_registrations_carry_their_projectors() -> None:
    """Xinference's version-2 JSON lists them inside ``model_src``, per hub."""
    body = {
        "version": 2,
        "model_name": "my-vl",
        "model_ability": ["chat", "vision"],
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": 4,
                "model_src": {
                    "huggingface": {
                        "model_id": REPO,
                        "quantizations": ["Q4_K_M"],
                        "model_file_name_template": "tiny-vl-{quantization}.gguf",
                        "multimodal_projectors": PROJECTORS,
                    },
                    "modelscope": {"model_id": "org/tiny-vl", "quantizations": ["Q4_K_M"]},
                },
            }
        ],
    }
    family = ModelFamily.model_validate(from_xinference_json(body, "LLM"))
    assert family.model_specs[0].multimodal_projectors == PROJECTORS


# -- the launch's choice -----------------------------------------------------------------------------------------
def test_a_vision_family_gets_its_first_projector_unless_told_otherwise() -> None:
    options, projector = plan_projector(choice(), "llama.cpp", TakesProjector, {"n_ctx": 512})
    assert (options, projector) == ({"n_ctx": 512}, PROJECTORS[0])
    # the official client's null is "unset"; a name of the spec's picks it; "" launches text only
    assert plan_projector(choice(), "llama.cpp", TakesProjector, {"multimodal_projector": None})[1] == PROJECTORS[0]
    options, projector = plan_projector(choice(), "llama.cpp", TakesProjector, {"multimodal_projector": PROJECTORS[1]})
    assert (options, projector) == ({}, PROJECTORS[1])
    assert plan_projector(choice(), "llama.cpp", TakesProjector, {"multimodal_projector": ""})[1] is None
    # an absolute path: a file on the worker (checked there)
    assert plan_projector(choice(), "llama.cpp", TakesProjector, {"multimodal_projector": "/m/x/../mm.gguf"})[1] == (
        "/m/mm.gguf"
    )


def test_no_projector_without_vision_or_without_an_engine_that_loads_one() -> None:
    assert plan_projector(choice(("chat",)), "llama.cpp", TakesProjector, {})[1] is None
    assert plan_projector(choice(), "vLLM", NoProjector, {})[1] is None  # not asked for: nothing to refuse


@pytest.mark.parametrize(
    ("abilities", "config", "value", "message"),
    [
        (("chat", "vision"), TakesProjector, "mmproj-other.gguf", "is not a projector of tiny-vl 1 ggufv2"),
        (("chat", "vision"), TakesProjector, 3, "must be a projector file name"),
        (("chat", "vision"), NoProjector, PROJECTORS[0], "vLLM cannot load a multimodal projector"),
        (("chat",), TakesProjector, PROJECTORS[0], "does not have the vision ability"),
    ],
)
def test_a_projector_that_cannot_be_honoured_is_a_400_naming_the_field(
    abilities: tuple[str, ...], config: type[BaseModel], value: object, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        plan_projector(
            choice(abilities), "vLLM" if config is NoProjector else "llama.cpp", config, {"multimodal_projector": value}
        )
    assert caught.value.param == "multimodal_projector"


def test_the_engine_option_itself_is_the_platforms() -> None:
    with pytest.raises(InvalidRequest, match="set by the platform") as caught:
        plan_projector(choice(), "llama.cpp", TakesProjector, {"projector": "/x.gguf"})
    assert caught.value.param == "projector"


# -- where the file is ---------------------------------------------------------------------------------------------
@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path / "home"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "XINFERENCE_MODEL_SRC"):
        monkeypatch.delenv(name, raising=False)
    with FakeHub() as fake:
        fake.add(REPO, "tiny-vl-Q4_K_M.gguf", os.urandom(20_000))
        for name in PROJECTORS:
            fake.add(REPO, name, os.urandom(5_000))
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def test_a_hub_projector_is_downloaded_beside_the_weights(hub: FakeHub) -> None:
    from xinference.model.download import resolve_model_path

    spec = ModelSpec.model_validate(gguf_spec())
    weights = resolve_model_path(spec, "Q4_K_M")
    seen: list[str] = []
    path = resolve_projector(spec, PROJECTORS[1], weights, file_progress=lambda name, done, size: seen.append(name))
    assert os.path.dirname(path) == os.path.dirname(weights)
    assert os.path.getsize(path) == 5_000 and set(seen) == {PROJECTORS[1]}
    assert [r.filename for r in hub.requests if r.method == "GET"].count(PROJECTORS[0]) == 0  # only the chosen one
    # cached: a second launch does not fetch it again
    before = len(hub.gets(PROJECTORS[1]))
    assert resolve_projector(spec, PROJECTORS[1], weights) == path
    assert len(hub.gets(PROJECTORS[1])) == before


def test_local_weights_have_their_projector_beside_them(tmp_path: Path) -> None:
    weights = tmp_path / "vl.gguf"
    weights.write_bytes(b"GGUF")
    spec = ModelSpec.model_validate(
        gguf_spec(model_id=None, model_uri=f"file://{weights}", model_file_name_template=None)
    )
    with pytest.raises(LaunchFailed, match=r"'mmproj-tiny-f16.gguf' is not beside the weights \(vl.gguf\)"):
        resolve_projector(spec, PROJECTORS[0], str(weights))
    (tmp_path / PROJECTORS[0]).write_bytes(b"GGUF")
    assert resolve_projector(spec, PROJECTORS[0], str(weights)) == str(tmp_path / PROJECTORS[0])
    # model_path given at launch: the same rule, against the folder of the launch's weights
    hub_spec = ModelSpec.model_validate(gguf_spec())
    found = resolve_projector(hub_spec, PROJECTORS[0], str(weights), model_path=str(tmp_path))
    assert found == str(tmp_path / PROJECTORS[0])
    # an absolute path is used as it is, when it exists on the worker
    assert resolve_projector(spec, str(tmp_path / PROJECTORS[0]), str(weights)) == str(tmp_path / PROJECTORS[0])
    with pytest.raises(LaunchFailed, match="does not exist on this worker"):
        resolve_projector(spec, str(tmp_path / "missing.gguf"), str(weights))


def test_catalog_projectors_belong_to_vision_families() -> None:
    """Every built-in spec that names projectors is a GGUF spec of a family with the vision ability (else the
    launch would never pick them), and the VL families served as GGUF include Qwen2.5-VL, Qwen3-VL and Gemma 3."""
    from xinference.model.registry import load_builtin_families

    with_projectors = set()
    for family in load_builtin_families():
        for spec in family.model_specs:
            if spec.multimodal_projectors:
                assert spec.model_format == "ggufv2", family.model_name
                assert "vision" in family.model_ability, family.model_name
                with_projectors.add(family.model_name)
    assert {"qwen2.5-vl-instruct", "Qwen3-VL-Instruct", "gemma-3-it", "gemma-4"} <= with_projectors
