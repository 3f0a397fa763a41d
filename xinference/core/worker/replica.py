"""What a worker knows about one replica it runs, and how the replica's process is set up (its Python, its
environment, the GPUs it sees). Plain data and functions: the actor (``actor.py``) holds the replicas.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import LOG_ENV
from xinference.engines import envs
from xinference.engines.base import Engine
from xinference.engines.registry import get_engine_class
from xinference.errors import XinferenceError
from xinference.hardware import HardwareInfo, detect_hardware

__all__ = ["_Replica", "device_env", "engine_class", "engine_process", "why_process_did_not_start"]


@dataclass
class _Replica:
    replica_uid: str
    address: str
    log_path: Path
    plan: LaunchPlan
    facts: dict[str, Any] = field(default_factory=dict)
    #: its engine's adapter class, looked up once when the replica is created (None: this worker does not know the
    #: engine; its model process then fails the load, naming it)
    engine: type[Engine] | None = None
    #: restarts in a row: back to 0 once it served ``health.RESTART_BUDGET_RESET_S`` since its last start
    restarts: int = 0
    #: loop time when its process last started serving
    serving_since: float = 0.0
    restarting: bool = False
    checking: bool = False
    last_health: float = 0.0
    #: the supervisor cancelled the launch (possibly before the process existed): it must not load
    cancelled: bool = False

    def report(self) -> dict[str, Any]:
        """What the supervisor needs to (re)adopt this replica (the plan as a dict: the supervisor reads it so)."""
        return {
            "plan": self.plan.to_dict(),
            "address": self.address,
            "pid": self.facts.get("pid"),
            "engine_config": self.facts.get("engine_config", {}),
        }

    @property
    def has_health_check(self) -> bool:
        """Whether its engine checks its own health (a managed server): the worker then polls it."""
        return self.engine is not None and self.engine.check_health is not Engine.check_health


def engine_class(name: str) -> type[Engine] | None:
    """The adapter class of engine ``name``, or None when this worker does not know it (its model process then
    fails the load, naming it). Looked up once per replica, when the worker creates it."""
    try:
        return get_engine_class(name)
    except XinferenceError:
        return None


def device_env(plan: LaunchPlan) -> dict[str, str]:
    """The environment that confines a replica's process to its GPUs (``CUDA_VISIBLE_DEVICES``: none for a CPU
    replica), with the log variable the worker fills in."""
    env = {LOG_ENV: "", "CUDA_VISIBLE_DEVICES": ""}
    gpus = {g["index"]: g for g in plan.hardware.get("gpus", [])}
    chosen = [gpus[i].get("uuid") or str(gpus[i].get("physical_index", i)) for i in plan.gpu_indices if i in gpus]
    env["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    return env


def engine_process(cls: type[Engine] | None, plan: LaunchPlan) -> tuple[str | None, dict[str, str]]:
    """The Python a replica's process starts with (an overlay engine env's, when its engine has one installed) and
    the environment variables its engine asks for. Asked at every start of the process: an engine environment
    installed since the last one is used by the next, and an overlay env is pointed at this worker's own main
    environment first (:func:`~xinference.engines.envs.overlay_python`)."""
    if cls is None:
        return None, {}
    hardware = HardwareInfo.model_validate(plan.hardware) if plan.hardware else detect_hardware()
    recipe = cls.env_recipe(hardware)
    python = envs.overlay_python(cls.name) if recipe is not None and recipe.overlay else None
    return (str(python) if python is not None else None), cls.process_env(hardware)


#: what a model process imports before xoscar reports its pool up: the first of these that fails is why it did not
_START_IMPORTS = "import xoscar.backends.indigen, xinference.core.xoscar_setup"


def why_process_did_not_start(python: str | None, env: dict[str, str]) -> str:
    """The root-cause line of a model process that exited before its pool came up (xoscar only says "Start sub
    pool failed" and the exit code; the traceback went to the worker's stderr). Found by running the same Python
    with the same environment on the imports the process starts with; called only after such a failure. Empty
    when those imports work (the process failed later, or not reproducibly)."""
    executable = python or sys.executable
    try:
        probe = subprocess.run(
            [executable, "-c", _START_IMPORTS],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{executable} could not run: {exc}"
    if probe.returncode == 0:
        return ""
    lines = [line.strip() for line in probe.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"{executable} exited with code {probe.returncode}"
