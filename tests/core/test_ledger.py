"""The resource ledger (``core/ledger.py``): its rules on plain data, then a property test of the real supervisor
booking through it while launches, added replicas, reloads, scale-downs, terminates and worker losses interleave.

The workers of the property test are test doubles (named so): GPU machines and several hosts cannot run here, and
what is under test is the supervisor's bookkeeping, which they exercise through the same actor calls a real worker
answers (launch, terminate, cancel, hardware, re-registration), with random delays and failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import xoscar as xo

from tests.machines import linux
from xinference.core.launch import LaunchPlan
from xinference.core.ledger import Ledger, LedgerConflict
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.engines.registry import get_engine_class
from xinference.errors import LaunchFailed, ModelNotFound, XinferenceError
from xinference.model.registry import ModelRegistry


def test_a_gpu_is_held_by_one_replica_and_released_once() -> None:
    ledger = Ledger()
    ledger.book("a-0", "a", "L", "w1", (0, 1), 10)
    with pytest.raises(LedgerConflict):
        ledger.book("b-0", "b", "M", "w1", (1,), 10)
    with pytest.raises(LedgerConflict):
        ledger.book("a-0", "a", "L", "w2", (), 10)
    ledger.book("b-0", "b", "M", "w2", (1,), 10)  # the same index on another worker is another GPU
    assert ledger.release("a-0") is not None and ledger.release("a-0") is None
    assert (ledger.made, ledger.released, len(ledger)) == (2, 1, 1)
    ledger.book("c-0", "c", "N", "w1", (1,), 10)


def test_memory_still_loading_is_what_the_worker_report_lacks() -> None:
    ledger = Ledger()
    ledger.book("a-0", "a", "L", "w1", (), 100)
    ledger.book("b-0", "b", "L", "w1", (0, 1), 60)
    ledger.book("c-0", "c", "L", "w1", (), 7, state="running")  # in the worker's own report already
    ledger.book("d-0", "d", "L", "w2", (), 5)
    assert ledger.loading("w1") == (100, {0: 30, 1: 30})
    ledger.mark("a-0", "running")
    assert ledger.loading("w1") == (0, {0: 30, 1: 30})
    assert [b.replica_uid for b in ledger.release_worker("w1")] == ["a-0", "b-0", "c-0"]
    assert ledger.held() == [("w2", ())]


# -- the supervisor under random interleavings --------------------------------------------------------------------
ENGINES = {
    "vLLM": "",
    "SGLang": "not here",
    "MLX": "not here",
    "llama.cpp": "",
    "Transformers": "",
    "sentence_transformers": "",
}
SMOL = ModelRegistry().get("smollm2-instruct")
CPU_REPLICA = get_engine_class("llama.cpp").estimate_memory(SMOL, SMOL.model_specs[0], "Q4_1", {}, linux()).total
#: each stand-in worker has room for two CPU replicas of the small model
RAM_FREE = int(CPU_REPLICA * 2.5)
LAUNCHES = {
    "c1": {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_gpu": None},
    "c2": {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_gpu": None},
    "g1": {
        "model_name": "qwen2.5-instruct",
        "model_engine": "vLLM",
        "model_format": "pytorch",
        "model_size_in_billions": "0_5",
    },
    "g2": {
        "model_name": "qwen2.5-instruct",
        "model_engine": "vLLM",
        "model_format": "pytorch",
        "model_size_in_billions": "0_5",
    },
}


class RandomStandInWorker(xo.StatelessActor):
    """Test double of a worker with two GPUs: launches take a random few milliseconds and sometimes fail, free RAM
    goes down with each CPU replica it runs, and it can be cut off and come back (re-registering what it runs)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._random = random.Random(seed)
        self.live: dict[str, dict[str, Any]] = {}  # replica uid -> plan
        self._cancelled: set[str] = set()

    async def hardware(self) -> dict[str, Any]:
        used = sum(CPU_REPLICA for plan in self.live.values() if not plan["gpu_indices"])
        hardware = linux(gpus=2).model_copy(update={"ram_free_bytes": RAM_FREE - used})
        return {**hardware.model_dump(mode="json"), "engines": ENGINES}

    async def launch_replica(self, plan: LaunchPlan) -> dict[str, Any]:
        plan_dict = plan.to_dict()  # the supervisor sends the dataclass; this double reads it as a dict
        await asyncio.sleep(self._random.uniform(0, 0.03))
        uid = plan_dict["replica_uid"]
        if uid in self._cancelled:
            raise LaunchFailed(f"the launch of {uid} was cancelled")
        if self._random.random() < 0.1:
            raise LaunchFailed("the model process exited with code 1 while loading")
        assert uid not in self.live, f"{uid} launched twice on {self.address}"
        self.live[uid] = plan_dict
        return {"address": f"{self.address}#{uid}", "pid": 1, "engine_config": {}}

    async def terminate_replica(self, replica_uid: str, why: str = "") -> None:
        await asyncio.sleep(self._random.uniform(0, 0.01))
        if self.live.pop(replica_uid, None) is None:
            raise ModelNotFound(f"replica {replica_uid!r} is not running on this worker")

    async def cancel_launch(self, replica_uid: str) -> None:
        self._cancelled.add(replica_uid)

    async def launch_progress(self, replica_uid: str) -> float:
        return 0.0

    async def reports(self) -> list[dict[str, Any]]:
        return [
            {"plan": plan, "address": f"{self.address}#{uid}", "pid": 1, "engine_config": {}}
            for uid, plan in self.live.items()
        ]

    async def kill(self, replica_uids: list[str]) -> None:
        for uid in replica_uids:
            self.live.pop(uid, None)

    async def running(self) -> dict[str, dict[str, Any]]:
        return self.live


@contextlib.asynccontextmanager
async def _cluster(workers: int) -> AsyncIterator[tuple[Any, list[Any]]]:
    pools = [await xo.create_actor_pool("127.0.0.1", n_process=0) for _ in range(workers + 1)]
    try:
        supervisor = await xo.create_actor(
            SupervisorActor, 0.0, address=pools[0].external_address, uid=SupervisorActor.default_uid()
        )
        refs = []
        for index, pool in enumerate(pools[1:]):
            ref = await xo.create_actor(
                RandomStandInWorker, index, address=pool.external_address, uid=WorkerActor.default_uid()
            )
            await supervisor.add_worker(ref.address, await ref.hardware())
            refs.append(ref)
        yield supervisor, refs
    finally:
        for pool in pools:
            await pool.stop()


async def _rejoin(supervisor: Any, worker: Any) -> None:
    """The worker comes back: it reports what it runs and stops what the supervisor says to kill."""
    answer = await supervisor.add_worker(worker.address, await worker.hardware(), await worker.reports())
    await worker.kill(list(answer["kill"]))


async def _step(rng: random.Random, supervisor: Any, workers: list[Any], lost: set[int]) -> None:
    roll = rng.random()
    listed = [m["model_uid"] for m in await supervisor.list_models()]
    uid = rng.choice(listed) if listed and roll >= 0.3 else rng.choice(list(LAUNCHES))
    if roll < 0.3:
        await supervisor.launch_model(
            {**LAUNCHES[uid], "model_uid": uid, "replica": rng.choice([1, 1, 2])}, rng.random() < 0.7
        )
    elif roll < 0.45:
        await supervisor.add_replicas(uid, 1, None if uid.startswith("c") else "auto")
    elif roll < 0.55:
        await supervisor.unload_model(uid)
    elif roll < 0.65:
        await supervisor.load_model(uid)
    elif roll < 0.8:
        await supervisor.terminate_model(uid)
    elif roll < 0.87:
        info = await supervisor.describe_model(uid)
        replicas = [r["replica_uid"] for r in info["replicas"]]
        if replicas:
            await supervisor.remove_replica(uid, int(rng.choice(replicas).rsplit("-", 1)[1]))
    elif roll < 0.93:
        index = rng.randrange(len(workers))
        if index not in lost:
            lost.add(index)
            await supervisor.remove_worker(workers[index].address)
    elif lost:
        index = rng.choice(sorted(lost))
        lost.discard(index)
        await _rejoin(supervisor, workers[index])


async def _settle(supervisor: Any) -> None:
    for _ in range(500):
        statuses = [m["status"] for m in await supervisor.list_models()]
        if not any(s in ("launching", "unloading") for s in statuses):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still busy: {statuses}")


async def _check(supervisor: Any, workers: list[Any]) -> None:
    """booked = running (nothing loads once settled): every replica a worker runs is booked once, on that worker,
    with its GPUs, and belongs to a model that lists it; nothing else is booked; no GPU is used twice; no worker
    runs more CPU replicas than its memory holds."""
    info = await supervisor.cluster_info()
    bookings = {b["replica_uid"]: b for b in info["bookings"]}
    running: dict[str, tuple[str, list[int]]] = {}
    for worker in workers:
        live = await worker.running()
        gpus = [i for plan in live.values() for i in plan["gpu_indices"]]
        assert len(gpus) == len(set(gpus)), f"a GPU of {worker.address} runs two replicas: {live}"
        cpu = [uid for uid, plan in live.items() if not plan["gpu_indices"]]
        assert len(cpu) * CPU_REPLICA <= RAM_FREE, f"{worker.address} is over its memory: {cpu}"
        running.update({uid: (worker.address, plan["gpu_indices"]) for uid, plan in live.items()})
    assert {uid: (b["worker"], b["gpu_indices"]) for uid, b in bookings.items()} == running
    assert all(b["state"] == "running" for b in bookings.values())
    listed = {r["replica_uid"] for replicas in info["models"].values() for r in replicas}
    assert listed == set(running)


@pytest.mark.parametrize("seed", range(6))
def test_bookings_match_what_runs_under_random_interleavings(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    rng = random.Random(seed)

    async def one(supervisor: Any, workers: list[Any], lost: set[int]) -> None:
        with contextlib.suppress(XinferenceError):
            await _step(rng, supervisor, workers, lost)

    async def main() -> None:
        async with _cluster(3) as (supervisor, workers):
            lost: set[int] = set()
            for _ in range(12):  # rounds of operations that overlap each other
                await asyncio.gather(*(one(supervisor, workers, lost) for _ in range(rng.randint(3, 8))))
                await _settle(supervisor)
                for index in sorted(lost):  # cut-off workers come back before the books are checked
                    await _rejoin(supervisor, workers[index])
                lost.clear()
                await _settle(supervisor)
                await _check(supervisor, workers)

    asyncio.run(asyncio.wait_for(main(), 120))
