"""The supervisor's control plane against defects found in review: every placement path books through the ledger
(reload, added replicas), bookings outlive a terminate until the replica's process is gone, each replica's memory
is checked against its own GPU, and a worker that hangs cannot freeze launches elsewhere or a terminate.

The workers are test doubles (named so) in real xoscar pools, answering the supervisor's real actor calls: GPU
machines cannot run here, and the double can hold a launch open or hang on demand. A double that is asked to start
a replica on a GPU another replica of it holds (loading or running) records a violation: that is two processes on
one GPU on a real machine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import xoscar as xo

from tests.core.supervisor.test_launch_races import ENGINES
from tests.machines import linux
from xinference.core.launch import LaunchPlan
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.errors import InvalidRequest, ModelNotFound, XinferenceError

QWEN = {
    "model_name": "qwen2.5-instruct",
    "model_engine": "vLLM",
    "model_format": "pytorch",
    "model_size_in_billions": "0_5",
}


class GpuStandInWorker(xo.StatelessActor):
    """Test double of a GPU worker: launches wait while the gate is closed; it records a violation when a launch
    names a GPU that a replica it is loading or running holds."""

    def __init__(self, hardware: dict[str, Any], hang: str = "") -> None:
        super().__init__()
        self._hardware = hardware
        self._hang = hang  # the name of a call that never answers
        self._gate = asyncio.Event()
        self._gate.set()
        self.holding: dict[str, tuple[int, ...]] = {}  # replica uid -> GPUs, loading or running
        self.violations: list[str] = []

    async def hardware(self) -> dict[str, Any]:
        if self._hang == "hardware":
            await asyncio.Event().wait()
        return self._hardware

    async def launch_replica(self, plan: LaunchPlan) -> dict[str, Any]:
        plan_dict = plan.to_dict()  # the supervisor sends the dataclass; this double reads it as a dict
        gpus = tuple(plan_dict["gpu_indices"])
        clash = [uid for uid, held in self.holding.items() if set(held) & set(gpus)]
        if clash:
            self.violations.append(f"{plan_dict['replica_uid']} on GPU {gpus} held by {clash}")
        self.holding[plan_dict["replica_uid"]] = gpus
        try:
            await self._gate.wait()
        except asyncio.CancelledError:
            self.holding.pop(plan_dict["replica_uid"], None)
            raise
        return {"address": f"{self.address}#{plan_dict['replica_uid']}", "pid": 1, "engine_config": {}}

    async def terminate_replica(self, replica_uid: str, why: str = "") -> None:
        if self._hang == "terminate_replica":
            await asyncio.Event().wait()
        if self.holding.pop(replica_uid, None) is None:
            raise ModelNotFound(f"replica {replica_uid!r} is not running on this worker")

    async def cancel_launch(self, replica_uid: str) -> None:
        return None

    async def close_gate(self) -> None:
        self._gate.clear()

    async def open_gate(self) -> None:
        self._gate.set()

    async def state(self) -> tuple[dict[str, tuple[int, ...]], list[str]]:
        return self.holding, self.violations


def _gpu_box(gpus: int, vram: int = 80) -> dict[str, Any]:
    return {**linux(gpus=gpus, vram=vram, vram_free=vram - 1).model_dump(mode="json"), "engines": ENGINES}


@contextlib.asynccontextmanager
async def _cluster(*workers: tuple[dict[str, Any], str]) -> AsyncIterator[tuple[Any, list[Any]]]:
    pools = [await xo.create_actor_pool("127.0.0.1", n_process=0) for _ in range(len(workers) + 1)]
    try:
        supervisor = await xo.create_actor(
            SupervisorActor, 0.0, address=pools[0].external_address, uid=SupervisorActor.default_uid()
        )
        refs = []
        for (hardware, hang), pool in zip(workers, pools[1:], strict=True):
            ref = await xo.create_actor(
                GpuStandInWorker, hardware, hang, address=pool.external_address, uid=WorkerActor.default_uid()
            )
            await supervisor.add_worker(ref.address, hardware)
            refs.append(ref)
        yield supervisor, refs
    finally:
        for pool in pools:
            await pool.stop()


@pytest.fixture()
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))

    def go(body: Callable[[Any, list[Any]], Awaitable[None]], *workers: tuple[dict[str, Any], str]) -> None:
        async def main() -> None:
            async with _cluster(*workers) as (supervisor, refs):
                await asyncio.wait_for(body(supervisor, refs), 60)

        asyncio.run(main())

    return go


async def _settled(attempt: Awaitable[Any]) -> Any:
    """The result of ``attempt``, or the XinferenceError it raised."""
    try:
        return await attempt
    except XinferenceError as exc:
        return exc


def test_a_reload_books_its_gpu_like_a_launch(run: Any) -> None:
    """A reload after a keep-alive unload used to place without the lock or a booking: a launch overlapping it got
    the same GPU."""

    async def body(supervisor: Any, workers: list[Any]) -> None:
        [worker] = workers
        await supervisor.launch_model({**QWEN, "model_uid": "a", "n_gpu": 1})
        await supervisor.unload_model("a")
        await worker.close_gate()
        reload = asyncio.ensure_future(_settled(supervisor.load_model("a")))
        await asyncio.sleep(0.2)  # the reload is placed and loading
        launch = await _settled(supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}, wait_ready=False))
        assert isinstance(launch, InvalidRequest) and "free GPU" in launch.message
        await worker.open_gate()
        assert (await reload)["status"] == "ready"
        assert (await worker.state())[1] == []

    run(body, (_gpu_box(1), ""))


def test_added_replicas_book_their_gpus_like_a_launch(run: Any) -> None:
    """Adding replicas took no lock and booked nothing: a launch overlapping it got the same GPU."""

    async def body(supervisor: Any, workers: list[Any]) -> None:
        [worker] = workers
        await supervisor.launch_model({**QWEN, "model_uid": "a", "n_gpu": 1})
        await worker.close_gate()
        added = asyncio.ensure_future(_settled(supervisor.add_replicas("a", 1, 1)))
        await asyncio.sleep(0.2)
        launch = await _settled(supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}, wait_ready=False))
        assert isinstance(launch, InvalidRequest) and "free GPU" in launch.message
        await worker.open_gate()
        assert (await added)["replica"] == 2
        assert (await worker.state())[1] == []

    run(body, (_gpu_box(2), ""))


def test_a_terminated_launch_keeps_its_gpu_until_its_process_is_gone(run: Any) -> None:
    """Terminate freed a loading replica's GPU at once, while its process still loaded onto it."""

    async def body(supervisor: Any, workers: list[Any]) -> None:
        [worker] = workers
        await worker.close_gate()
        await supervisor.launch_model({**QWEN, "model_uid": "a", "n_gpu": 1}, wait_ready=False)
        await asyncio.sleep(0.2)
        await supervisor.terminate_model("a")
        launch = await _settled(supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}, wait_ready=False))
        assert isinstance(launch, InvalidRequest) and "free GPU" in launch.message
        again = await _settled(supervisor.launch_model({**QWEN, "model_uid": "a", "n_gpu": None}, wait_ready=False))
        assert "still stopping" in again.message  # the same uid waits for its old replica to be gone
        await worker.open_gate()
        for _ in range(100):  # the cancelled launch stops what it started, then the GPU is free
            if not (await supervisor.cluster_info())["bookings"]:
                break
            await asyncio.sleep(0.02)
        assert (await supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}))["status"] == "ready"
        assert (await worker.state())[1] == []

    run(body, (_gpu_box(1), ""))


def test_two_replicas_on_two_gpus_are_each_checked_against_their_own_gpu(run: Any) -> None:
    """The memory check compared every replica with the first replica's GPU: replica: 2 of vLLM on two 24 GiB GPUs
    (~21.6 GiB each) was always refused."""

    async def body(supervisor: Any, workers: list[Any]) -> None:
        info = await supervisor.launch_model({**QWEN, "model_uid": "a", "replica": 2})
        assert sorted(tuple(r["gpu_indices"]) for r in info["replicas"]) == [(0,), (1,)]
        refused = await _settled(supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}))
        assert isinstance(refused, InvalidRequest) and "free GPU" in refused.message

    run(body, (_gpu_box(2, vram=24), ""))


def test_a_worker_whose_hardware_hangs_does_not_freeze_launches_elsewhere(run: Any, monkeypatch: Any) -> None:
    """The memory check awaited a worker's hardware() under the supervisor's lock with no time limit."""

    async def body(supervisor: Any, workers: list[Any]) -> None:
        hung, healthy = workers
        slow = asyncio.ensure_future(supervisor.launch_model({**QWEN, "model_uid": "a", "worker_ip": hung.address}))
        await asyncio.sleep(0.3)  # it waits for the hung worker's hardware
        fast = await asyncio.wait_for(
            supervisor.launch_model({**QWEN, "model_uid": "b", "worker_ip": healthy.address}), 3
        )
        assert fast["status"] == "ready" and not slow.done()
        assert (await asyncio.wait_for(slow, 10))["status"] == "ready"  # after the bounded wait, its last report

    run(body, (_gpu_box(1), "hardware"), (_gpu_box(1), ""))


def test_a_terminate_on_a_hung_worker_returns_and_keeps_the_gpu_booked(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XINFERENCE_WORKER_CALL_TIMEOUT", "1")

    async def body(supervisor: Any, workers: list[Any]) -> None:
        await supervisor.launch_model({**QWEN, "model_uid": "a", "n_gpu": 1})
        await asyncio.wait_for(supervisor.terminate_model("a"), 5)
        assert [b["state"] for b in (await supervisor.cluster_info())["bookings"]] == ["stopping"]
        launch = await _settled(supervisor.launch_model({**QWEN, "model_uid": "b", "n_gpu": 1}))
        assert isinstance(launch, InvalidRequest)  # its process may still hold the GPU
        await supervisor.remove_worker(workers[0].address)  # declared gone: what it held is free
        assert (await supervisor.cluster_info())["bookings"] == []

    run(body, (_gpu_box(1), "terminate_replica"))
