"""The launch plan of one replica, for the worker tests: a llama.cpp replica ``m-0`` of model ``m`` on the
Linux machine of :mod:`tests.machines`, with the fields a test changes."""

from __future__ import annotations

from typing import Any

from tests.machines import linux
from xinference.core.launch import LaunchPlan


def replica_plan(**changes: Any) -> LaunchPlan:
    fields: dict[str, Any] = {
        "model_uid": "m",
        "replica_uid": "m-0",
        "model_engine": "llama.cpp",
        "family": {},
        "spec": {},
        "quantization": "Q4_0",
        "engine_config": {},
        "hardware": linux().model_dump(mode="json"),
    }
    return LaunchPlan(**{**fields, **changes})
