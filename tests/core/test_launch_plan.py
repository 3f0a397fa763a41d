"""A LaunchPlan crosses processes as it is (pickled) and is stored as JSON only in the worker's saved state."""

from __future__ import annotations

import json
import pickle

import pytest

from xinference.core.launch import LaunchPlan


def _plan() -> LaunchPlan:
    return LaunchPlan(
        model_uid="m",
        replica_uid="m-0",
        model_engine="llama.cpp",
        family={"model_name": "m"},
        spec={"model_format": "ggufv2", "quantizations": ["Q4_0"]},
        quantization="Q4_0",
        engine_config={"n_ctx": 2048},
        hardware={"gpus": [{"index": 0}]},
        gpu_indices=[0],
        draft=None,
        launch_id="L1",
        incarnation="I1",
    )


def test_it_pickles_as_the_dataclass() -> None:
    plan = _plan()
    again = pickle.loads(pickle.dumps(plan))
    assert isinstance(again, LaunchPlan) and again == plan


def test_its_dict_is_json_and_comes_back_equal() -> None:
    plan = _plan()
    stored = json.loads(json.dumps(plan.to_dict()))
    assert LaunchPlan.from_dict(stored) == plan


def test_its_dict_is_a_copy() -> None:
    plan = _plan()
    plan.to_dict()["engine_config"]["n_ctx"] = 1
    assert plan.engine_config == {"n_ctx": 2048}


def test_a_plan_saved_by_another_version_still_loads() -> None:
    """Fields added since it was saved take their defaults; a key this version does not know is left out."""
    saved = {key: value for key, value in _plan().to_dict().items() if key not in ("launch_id", "incarnation")}
    saved["added_later"] = True
    plan = LaunchPlan.from_dict(saved)
    assert plan.launch_id == "" and plan.incarnation == "" and plan.engine_config == {"n_ctx": 2048}


def test_a_plan_without_a_required_field_is_refused() -> None:
    saved = _plan().to_dict()
    del saved["replica_uid"]
    with pytest.raises(TypeError, match="replica_uid"):
        LaunchPlan.from_dict(saved)
