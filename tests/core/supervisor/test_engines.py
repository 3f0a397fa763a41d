"""The supervisor decides engines from what each *worker* reports, and sizes GPU placement from the engine.

Workers with GPUs or with installs other than this machine's cannot run here, so two stand-in worker actors (test
doubles named as such) report those machines and record the launch plans they are sent. The supervisor under test
is the real one, in a real xoscar pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import xoscar as xo

from tests.machines import linux
from xinference.core.launch import LaunchPlan
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor
from xinference.errors import EngineRejected, InvalidRequest

INSTALLED = ""
NOT_INSTALLED = "vLLM is not installed on this worker; install it with `xinference engine install vLLM`"


class StandInWorker(xo.StatelessActor):
    """Test double of a remote worker: reports a given machine, records launch plans, starts nothing."""

    def __init__(self, hardware: dict[str, Any]) -> None:
        super().__init__()
        self._hardware = hardware
        self.plans: list[dict[str, Any]] = []

    async def hardware(self) -> dict[str, Any]:
        return self._hardware

    async def launch_replica(self, plan: LaunchPlan) -> dict[str, Any]:
        plan_dict = plan.to_dict()  # the supervisor sends the dataclass; this double reads it as a dict
        self.plans.append(plan_dict)
        return {"address": self.address, "pid": 1, "engine_config": {}}

    async def recorded(self) -> list[dict[str, Any]]:
        return self.plans


def _report(gpus: int, vllm: str) -> dict[str, Any]:
    engines = {
        "vLLM": vllm,
        "SGLang": "not here",
        "MLX": "not here",
        "llama.cpp": INSTALLED,
        "Transformers": INSTALLED,
        "sentence_transformers": INSTALLED,
    }
    return {**linux(gpus=gpus).model_dump(mode="json"), "engines": engines}


@contextlib.asynccontextmanager
async def _cluster() -> AsyncIterator[tuple[Any, Any, Any]]:
    """A real supervisor with a 2-GPU stand-in worker where vLLM is installed and a CPU one where it is not."""
    pools = [await xo.create_actor_pool("127.0.0.1", n_process=0) for _ in range(3)]
    try:
        supervisor = await xo.create_actor(
            SupervisorActor, address=pools[0].external_address, uid=SupervisorActor.default_uid()
        )
        gpu_box = await xo.create_actor(
            StandInWorker,
            _report(gpus=2, vllm=INSTALLED),
            address=pools[1].external_address,
            uid=WorkerActor.default_uid(),
        )
        cpu_box = await xo.create_actor(
            StandInWorker,
            _report(gpus=0, vllm=NOT_INSTALLED),
            address=pools[2].external_address,
            uid=WorkerActor.default_uid(),
        )
        for worker in (gpu_box, cpu_box):
            await supervisor.add_worker(worker.address, await worker.hardware())
        yield supervisor, gpu_box, cpu_box
    finally:
        for pool in pools:
            await pool.stop()


@pytest.fixture()
def run_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))

    def run(body: Callable[[Any, Any, Any], Awaitable[None]]) -> None:
        async def main() -> None:
            async with _cluster() as (supervisor, gpu_box, cpu_box):
                await body(supervisor, gpu_box, cpu_box)

        asyncio.run(main())

    return run


def test_engine_table_is_per_worker_and_launch_follows_the_chosen_worker(run_in_cluster: Any) -> None:
    run_in_cluster(_table_and_launch)


async def _table_and_launch(supervisor: Any, gpu_box: Any, cpu_box: Any) -> None:
    table = await supervisor.query_engines("LLM", "qwen2.5-instruct")
    assert isinstance(table["vLLM"], list)  # accepted: one worker can run it
    assert isinstance(table["SGLang"], str)
    launch = {
        "model_name": "qwen2.5-instruct",
        "model_engine": "vLLM",
        "model_format": "pytorch",
        "model_size_in_billions": "0_5",
        "ignore_memory_check": True,
    }
    with pytest.raises(EngineRejected) as refused:
        await supervisor.launch_model({**launch, "worker_ip": cpu_box.address})
    assert "xinference engine install vLLM" in refused.value.message  # the worker's own reason, not this machine's
    await supervisor.launch_model({**launch, "worker_ip": gpu_box.address})
    assert len(await gpu_box.recorded()) == 1 and not await cpu_box.recorded()


def test_tensor_parallel_launch_gets_as_many_gpus(run_in_cluster: Any) -> None:
    run_in_cluster(_tensor_parallel)


async def _tensor_parallel(supervisor: Any, gpu_box: Any, cpu_box: Any) -> None:
    await supervisor.launch_model(
        {
            "model_name": "qwen2.5-instruct",
            "model_engine": "vLLM",
            "model_format": "pytorch",
            "model_size_in_billions": "0_5",
            "ignore_memory_check": True,
            "worker_ip": gpu_box.address,
            "engine_kwargs": {"tensor_parallel_size": 2},
        }
    )
    (plan,) = await gpu_box.recorded()
    assert plan["gpu_indices"] == [0, 1]
    with pytest.raises(InvalidRequest, match="n_gpu=2"):  # both GPUs are taken now: a second TP=2 cannot fit
        await supervisor.launch_model(
            {
                "model_name": "qwen2.5-instruct",
                "model_engine": "vLLM",
                "model_uid": "second",
                "model_format": "pytorch",
                "model_size_in_billions": "0_5",
                "ignore_memory_check": True,
                "worker_ip": gpu_box.address,
                "engine_kwargs": {"tensor_parallel_size": 2},
            }
        )
