"""The worker's saved replicas (``core/worker/state.py``): what a restarted worker relaunches."""

from __future__ import annotations

import json
from pathlib import Path

from xinference.core.launch import LaunchPlan
from xinference.core.worker.state import SavedReplicas


def _plan(uid: str) -> LaunchPlan:
    return LaunchPlan(
        model_uid="m",
        replica_uid=uid,
        model_engine="llama.cpp",
        family={},
        spec={},
        quantization="Q4_1",
        engine_config={"n_ctx": 1024},
    )


def test_saved_plans_come_back_as_they_were(tmp_path: Path) -> None:
    saved = SavedReplicas(tmp_path / "worker" / "replicas.json")
    assert saved.load() == []  # nothing saved yet
    saved.save([_plan("m-0"), _plan("m-1")])
    assert saved.load() == [_plan("m-0"), _plan("m-1")]
    saved.save([])
    assert saved.load() == []


def test_an_unreadable_plan_is_skipped_and_the_others_relaunch(tmp_path: Path) -> None:
    path = tmp_path / "replicas.json"
    path.write_text(json.dumps([{"replica_uid": "broken"}, _plan("m-0").to_dict(), "junk"]), encoding="utf-8")
    assert SavedReplicas(path).load() == [_plan("m-0")]
    path.write_text("{not json", encoding="utf-8")
    assert SavedReplicas(path).load() == []
