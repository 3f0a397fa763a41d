"""The supervisor's plain parts (``core/supervisor/``) run as they are, without an actor pool: each is built here
with the collaborators SupervisorActor gives it, and the workers are stand-ins (test doubles named as such: plain
objects with the worker's async methods, called through the same ``WorkerEntry.call``)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.machines import linux
from xinference.core.background import BackgroundTasks
from xinference.core.launch import LaunchPlan
from xinference.core.ledger import Ledger
from xinference.core.supervisor.autostart import Autostart, History, LaunchHistory
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.cache import Caches
from xinference.core.supervisor.catalog import Catalog
from xinference.core.supervisor.envs import EngineEnvs
from xinference.core.supervisor.launcher import Launcher
from xinference.core.supervisor.lifecycle import Lifecycle
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import WorkerEntry, Workers
from xinference.core.supervisor.scaling import Scaler
from xinference.core.supervisor.tombstones import Tombstones
from xinference.core.supervisor.usage import Usage
from xinference.errors import InvalidRequest, ModelNotFound, ModelUnavailable
from xinference.model.registry import ModelRegistry

SMOL = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_uid": "smol"}


class StandInWorker:
    """Test double of a worker's actor reference: records what it is asked and starts no process."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.plans: list[dict[str, Any]] = []
        self.stopped: list[str] = []
        self.cache = [{"id": f"{address}/smol", "model_name": "smollm2-instruct"}]
        self.installing = False

    async def hardware(self) -> dict[str, Any]:
        return linux().model_dump(mode="json")

    async def launch_replica(self, plan: LaunchPlan) -> dict[str, Any]:
        plan_dict = plan.to_dict()  # the supervisor sends the dataclass; this double reads it as a dict
        self.plans.append(plan_dict)
        return {"address": f"{self.address}:{plan_dict['replica_uid']}", "pid": 1, "engine_config": {"n_ctx": 2048}}

    async def terminate_replica(self, replica_uid: str, why: str) -> None:
        self.stopped.append(replica_uid)

    async def list_cache(self, model_name: str | None) -> list[dict[str, Any]]:
        return [e for e in self.cache if model_name in (None, e["model_name"])]

    async def remove_cache(self, entry_id: str) -> dict[str, Any]:
        entry = next((e for e in self.cache if e["id"] == entry_id), None)
        if entry is None:
            raise ModelNotFound(f"no cache entry {entry_id!r}")
        self.cache.remove(entry)
        return entry

    async def engine_env(self, name: str) -> dict[str, Any]:
        return {"engine": name, "installing": self.installing}

    async def usage(self) -> dict[str, Any]:
        return {"cpu_percent": 12.5}


def _workers(*addresses: str) -> tuple[Workers, dict[str, StandInWorker]]:
    stand_ins = {a: StandInWorker(a) for a in addresses}
    return {a: WorkerEntry(a, ref=w, hardware=linux()) for a, w in stand_ins.items()}, stand_ins


class _Parts:
    """The launch-side parts wired as SupervisorActor wires them, over stand-in workers."""

    def __init__(self, home: Path) -> None:
        self.workers, self.stand_ins = _workers("w1")
        self.models = ModelTable()
        self.ledger = Ledger()
        self.tombstones = Tombstones(home / "tombstones.json")
        self.history = History(LaunchHistory(home / "launch_history.json"), self.models)
        lock = asyncio.Lock()
        booker = Booker(self.workers, self.ledger)
        self.launcher = Launcher(
            ModelRegistry(),
            self.models,
            self.workers,
            self.ledger,
            booker,
            lock,
            BackgroundTasks(logging.getLogger(__name__)),
            self.tombstones,
            self.history,
            "inc",
        )
        self.scaler = Scaler(self.models, booker, self.ledger, lock, self.launcher)
        self.lifecycle = Lifecycle(self.models, booker, lock, self.launcher)


def test_the_model_table_counts_changes_and_names_what_is_missing() -> None:
    table = ModelTable()
    assert table.routes() == (0, {}) and "m" not in table and table.find("m") is None
    table.changed()
    assert table.version == 1
    with pytest.raises(ModelNotFound, match="'m' is not running or launching"):
        table.get("m")
    with pytest.raises(ModelNotFound, match="'m' is not running"):
        table.events("m")


def test_launch_scale_unload_load_and_terminate_without_an_actor(tmp_path: Path) -> None:
    asyncio.run(_launch_scale_unload_load_and_terminate(tmp_path))


async def _launch_scale_unload_load_and_terminate(home: Path) -> None:
    parts = _Parts(home)
    worker = parts.stand_ins["w1"]
    info = await parts.launcher.launch(dict(SMOL))
    assert info["status"] == "ready" and info["engine_config"] == {"n_ctx": 2048}
    assert [p["incarnation"] for p in worker.plans] == ["inc"] and parts.models.version >= 2
    assert [b.state for b in parts.ledger] == ["running"]

    added = await parts.scaler.add("smol", 1, None)
    assert added["replica"] == 2 and [r["replica_uid"] for r in added["replicas"]] == ["smol-1"]
    assert await parts.scaler.remove("smol", 1) == 1 and worker.stopped == ["smol-1"]
    with pytest.raises(InvalidRequest, match="last replica"):
        await parts.scaler.remove("smol", 0)

    unloaded = await parts.lifecycle.unload("smol", "idle")
    assert unloaded["status"] == "unloaded" and len(parts.ledger) == 0
    loaded = await parts.lifecycle.load("smol")
    assert loaded["status"] == "ready" and [p["replica_uid"] for p in worker.plans][-1] == "smol-2"

    launch_id = parts.models.get("smol").launch_id
    await parts.launcher.terminate("smol")
    assert "smol" not in parts.models and len(parts.ledger) == 0 and launch_id in parts.tombstones
    entries = await parts.history.entries()
    assert [(e["model_uid"], e["autostart"], e["terminated_at"] is not None) for e in entries] == [
        ("smol", False, True)
    ]
    with pytest.raises(ModelNotFound):
        await parts.launcher.terminate("smol")


def test_a_vision_launch_books_its_projector_too(tmp_path: Path) -> None:
    asyncio.run(_vision_launch_books_its_projector(tmp_path))


async def _vision_launch_books_its_projector(home: Path) -> None:
    from xinference.engines.llama_cpp.engine import LlamaCppEngine
    from xinference.engines.memory import UNKNOWN_PROJECTOR_BYTES

    parts = _Parts(home)
    request = {"model_name": "gemma-3-it", "model_engine": "llama.cpp", "model_format": "ggufv2"}
    request |= {"model_size_in_billions": 4, "quantization": "q4_0"}
    for uid, projector in (("seeing", None), ("blind", "")):
        await parts.launcher.launch({**request, "model_uid": uid, "engine_kwargs": {"multimodal_projector": projector}})
    booked = {b.model_uid: b.nbytes for b in parts.ledger}
    record = parts.models.get("seeing")
    assert record.sources["projector"] == "mmproj-model-f16-4B.gguf"
    assert booked["seeing"] - booked["blind"] == UNKNOWN_PROJECTOR_BYTES
    choice = record.choice
    text_only = LlamaCppEngine.estimate_memory(choice.family, choice.spec, choice.quantization, {}, record.hardware)
    assert booked["blind"] == text_only.total


def test_autostart_launches_the_entries_not_running_and_goes_on_past_a_failure(tmp_path: Path) -> None:
    asyncio.run(_autostart(tmp_path))


async def _autostart(home: Path) -> None:
    models = ModelTable()
    history = History(LaunchHistory(home / "launch_history.json"), models)
    for uid, autostart in (("a", True), ("b", False), ("c", True)):
        history.remember(uid, {"model_name": "x", "autostart": autostart}, "llama.cpp")
    launched: list[str] = []

    async def launch(request: dict[str, Any]) -> None:
        launched.append(request["model_uid"])
        if request["model_uid"] == "a":
            raise ModelUnavailable("no worker has joined this cluster yet")

    background = BackgroundTasks(logging.getLogger(__name__))
    autostart = Autostart(history, models, background, launch, started=0.0, grace=0.0)
    autostart.schedule()
    while len(background):
        await asyncio.sleep(0.01)
    assert launched == ["a", "c"]  # b does not autostart; a's failure does not stop c


def test_catalog_caches_envs_and_usage_over_stand_in_workers() -> None:
    asyncio.run(_catalog_caches_envs_and_usage())


async def _catalog_caches_envs_and_usage() -> None:
    workers, stand_ins = _workers("w1", "w2")
    catalog = Catalog(ModelRegistry(), workers)
    listed = await catalog.registrations("LLM", detailed=False)
    assert {"model_name": "smollm2-instruct", "is_builtin": True} in listed
    assert "llama.cpp" in await catalog.engines("LLM", "smollm2-instruct")

    caches = Caches(workers)
    assert len(await caches.entries()) == 2
    with pytest.raises(InvalidRequest, match="exactly one"):
        await caches.remove()
    removed = await caches.remove(model_name="smollm2-instruct", worker="w2")
    assert [e["id"] for e in removed] == ["w2/smol"] and stand_ins["w1"].cache != []

    envs = EngineEnvs(workers)
    with pytest.raises(ModelNotFound, match="no worker 'w9'"):
        await envs.status("llama.cpp", "w9")
    assert [s["installing"] for s in await envs.status("llama.cpp")] == [False, False]
    with pytest.raises(ModelUnavailable, match="no worker has joined"):
        await EngineEnvs({}).status("llama.cpp")

    async def broken() -> dict[str, Any]:
        raise ConnectionError("gone")

    stand_ins["w2"].usage = broken  # type: ignore[method-assign]
    assert await Usage(workers).of_workers() == {"w1": {"cpu_percent": 12.5}}  # w2 is left out of this scrape
