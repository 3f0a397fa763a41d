"""A model actor's ``load_status`` carries its load's progress, and the actor takes its LaunchPlan as sent: in a
real model process, through a typed reference (``core/refs.py``), the plan pickled by xoscar."""

from __future__ import annotations

import asyncio
import sys

import pytest
import xoscar as xo

from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import ModelActor
from xinference.core.refs import ReplicaRef, replica_ref
from xinference.errors import ModelUnavailable

PLAN = LaunchPlan(
    model_uid="m",
    replica_uid="m-0",
    model_engine="llama.cpp",
    family={},
    spec={},
    quantization="Q4_0",
    engine_config={"n_ctx": 512},
    launch_id="L1",
)


def test_load_status_carries_the_progress() -> None:
    actor = ModelActor(PLAN)

    async def scenario() -> tuple[dict[str, object], dict[str, object]]:
        before = await actor.load_status()
        actor._on_download(50, 200)  # the download thread's callback
        return before, await actor.load_status()

    before, during = asyncio.run(scenario())
    assert before["progress"] == 0.0 and before["stage"] == "locating the weights"
    assert during["progress"] == 0.25 and during["stage"] == "downloading" and during["done_bytes"] == 50


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sub pools are started the Linux way here")
@pytest.mark.timeout(120)
def test_the_plan_crosses_to_a_model_process_as_a_launch_plan() -> None:
    async def scenario() -> tuple[dict[str, object], float, str]:
        import xinference.core.xoscar_setup  # noqa: F401 - as every pool of the platform does

        pool = await xo.create_actor_pool("127.0.0.1", n_process=0, auto_recover=False)
        try:
            address = await pool.append_sub_pool(label="model:m-0", modules=["xinference.core.xoscar_setup"])
            await xo.create_actor(ModelActor, PLAN, address=address, uid=ModelActor.default_uid())
            ref: ReplicaRef = await replica_ref(address)
            status = await ref.load_status()
            progress = await ref.progress()
            with pytest.raises(ModelUnavailable) as refused:  # its message reads the plan's fields there
                await ref.chat({"messages": []})
            await pool.remove_sub_pool(address, timeout=5, force=True)
            return status, progress, refused.value.message
        finally:
            await pool.stop()

    status, progress, refusal = asyncio.run(scenario())
    assert status["progress"] == 0.0 == progress and status["stage"] == "locating the weights"
    assert refusal == "model 'm' is not loaded"
