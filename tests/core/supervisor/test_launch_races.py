"""Issue 13, items 2 and 4: launches that overlap each other or a terminate.

The worker here is a test double (named so): it records plans and holds each ``launch_replica`` until the test
opens a gate, which is what makes the overlap happen on demand; real workers load models for seconds, the same
window. The supervisor under test is the real one, in a real xoscar pool. GPU machines cannot run here, hence the
double's reported hardware.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import xoscar as xo

from tests.machines import GIB, linux
from xinference.core.launch import LaunchPlan
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.engines.registry import get_engine_class
from xinference.errors import InvalidRequest, XinferenceError
from xinference.model.registry import ModelRegistry

ENGINES = {
    "vLLM": "",
    "SGLang": "not here",
    "MLX": "not here",
    "llama.cpp": "",
    "Transformers": "",
    "sentence_transformers": "",
}


class GatedStandInWorker(xo.StatelessActor):
    """Test double of a worker: records plans, keeps each launch waiting until ``open_gate``, tracks which
    replicas it would be running (started and not terminated)."""

    def __init__(self, hardware: dict[str, Any]) -> None:
        super().__init__()
        self._hardware = hardware
        self._gate = asyncio.Event()
        self.plans: list[dict[str, Any]] = []
        self.live: set[str] = set()

    async def hardware(self) -> dict[str, Any]:
        return self._hardware

    async def launch_replica(self, plan: LaunchPlan) -> dict[str, Any]:
        plan_dict = plan.to_dict()  # the supervisor sends the dataclass; this double reads it as a dict
        self.plans.append(plan_dict)
        await self._gate.wait()
        if plan_dict["replica_uid"] in self.live:
            raise InvalidRequest(f"replica {plan_dict['replica_uid']} is already running here")
        self.live.add(plan_dict["replica_uid"])
        return {"address": self.address, "pid": 1, "engine_config": {}}

    async def terminate_replica(self, replica_uid: str, why: str = "") -> None:
        self.live.discard(replica_uid)

    async def cancel_launch(self, replica_uid: str) -> None:
        return None

    async def launch_progress(self, replica_uid: str) -> float:
        return 0.0

    async def open_gate(self) -> None:
        self._gate.set()

    async def state(self) -> tuple[list[dict[str, Any]], list[str]]:
        return self.plans, sorted(self.live)


@contextlib.asynccontextmanager
async def _cluster(hardware: dict[str, Any]) -> AsyncIterator[tuple[Any, Any]]:
    pools = [await xo.create_actor_pool("127.0.0.1", n_process=0) for _ in range(2)]
    try:
        supervisor = await xo.create_actor(
            SupervisorActor, address=pools[0].external_address, uid=SupervisorActor.default_uid()
        )
        worker = await xo.create_actor(
            GatedStandInWorker, hardware, address=pools[1].external_address, uid=WorkerActor.default_uid()
        )
        await supervisor.add_worker(worker.address, hardware)
        yield supervisor, worker
    finally:
        for pool in pools:
            await pool.stop()


@pytest.fixture()
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))

    def go(hardware: dict[str, Any], body: Callable[[Any, Any], Awaitable[None]]) -> None:
        async def main() -> None:
            async with _cluster(hardware) as (supervisor, worker):
                await asyncio.wait_for(body(supervisor, worker), 60)

        asyncio.run(main())

    return go


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    while not await check():
        await asyncio.sleep(0.01)


def _cpu_box(ram_free: int = 20) -> dict[str, Any]:
    return {**linux(gpus=0, ram_free=ram_free).model_dump(mode="json"), "engines": ENGINES}


SMOL = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp"}


def test_terminate_during_launch_leaves_no_replica_and_the_uid_relaunches(run: Any) -> None:
    async def body(supervisor: Any, worker: Any) -> None:
        await supervisor.launch_model({**SMOL, "replica": 2}, wait_ready=False)
        await _until(lambda: _plans_at_least(worker, 1))  # replica 0 is loading
        await supervisor.terminate_model("smollm2-instruct")
        await worker.open_gate()
        # the launch notices it was terminated and stops what it started; nothing else starts
        await _until(lambda: _nothing_launching(supervisor))
        plans, live = await worker.state()
        assert live == [] and len(plans) == 1
        info = await supervisor.launch_model(SMOL)  # the uid is free again
        assert info["model_uid"] == "smollm2-instruct"
        assert (await worker.state())[1] == ["smollm2-instruct-0"]

    run(_cpu_box(), body)


def test_overlapping_launches_take_different_gpus(run: Any) -> None:
    hardware = {**linux(gpus=2).model_dump(mode="json"), "engines": ENGINES}
    launch = {
        "model_name": "qwen2.5-instruct",
        "model_engine": "vLLM",
        "model_format": "pytorch",
        "model_size_in_billions": "0_5",
        "ignore_memory_check": True,
    }

    async def body(supervisor: Any, worker: Any) -> None:
        await asyncio.gather(
            supervisor.launch_model({**launch, "model_uid": "a"}, wait_ready=False),
            supervisor.launch_model({**launch, "model_uid": "b"}, wait_ready=False),
        )
        await _until(lambda: _plans_at_least(worker, 2))
        plans, _ = await worker.state()
        assert sorted(tuple(p["gpu_indices"]) for p in plans) == [(0,), (1,)]
        with pytest.raises(InvalidRequest, match="n_gpu"):  # both GPUs are booked by launches still loading
            await supervisor.launch_model({**launch, "model_uid": "c", "n_gpu": 1}, wait_ready=False)
        await worker.open_gate()

    run(hardware, body)


def test_overlapping_launches_count_memory_still_loading(run: Any) -> None:
    family = ModelRegistry().get("smollm2-instruct")
    engine = get_engine_class("llama.cpp")
    estimate = engine.estimate_memory(family, family.model_specs[0], "Q4_1", {}, linux())
    # room for one copy and a half: the second launch must be refused while the first still loads
    hardware = _cpu_box()
    hardware["ram_free_bytes"] = int(estimate.total * 1.5)

    async def body(supervisor: Any, worker: Any) -> None:
        await supervisor.launch_model(SMOL, wait_ready=False)
        await _until(lambda: _plans_at_least(worker, 1))
        with pytest.raises(XinferenceError, match="ignore_memory_check"):
            await supervisor.launch_model({**SMOL, "model_uid": "second"}, wait_ready=False)
        await worker.open_gate()

    assert estimate.total < 20 * GIB
    run(hardware, body)


async def _plans_at_least(worker: Any, count: int) -> bool:
    return len((await worker.state())[0]) >= count


async def _nothing_launching(supervisor: Any) -> bool:
    return all(m.get("status") != "launching" for m in await supervisor.list_models())


class SilentStandInWorker(GatedStandInWorker):
    """Test double of a worker whose hardware report fails (its probe broke), launches still work."""

    async def hardware(self) -> dict[str, Any]:
        raise RuntimeError("the hardware probe failed")


def test_a_worker_that_cannot_report_its_hardware_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 9: a lasting failure (the memory check works from stale numbers) is logged where operators look."""
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    hardware = _cpu_box()

    async def main() -> None:
        pools = [await xo.create_actor_pool("127.0.0.1", n_process=0) for _ in range(2)]
        try:
            supervisor = await xo.create_actor(
                SupervisorActor, address=pools[0].external_address, uid=SupervisorActor.default_uid()
            )
            worker = await xo.create_actor(
                SilentStandInWorker, hardware, address=pools[1].external_address, uid=WorkerActor.default_uid()
            )
            await supervisor.add_worker(worker.address, hardware)
            await worker.open_gate()
            await supervisor.launch_model(SMOL)
        finally:
            for pool in pools:
                await pool.stop()

    with caplog.at_level("DEBUG", logger="xinference.core.supervisor.actor"):
        asyncio.run(main())
    reports = [r for r in caplog.records if "did not report fresh hardware" in r.getMessage()]
    assert reports and all(r.levelname == "WARNING" for r in reports)
