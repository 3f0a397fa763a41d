"""ModelActor.load after ``engine.load()`` fails: the engine is unloaded, so nothing it started outlives the launch.

The first test is the case that leaked: the real Transformers engine on real weights (SmolLM2-135M converted from the
bundled GGUF), failing after its decode thread has loaded the model (fault injected right after ``_start_loop``, where
MLX's and Transformers' loads read the tokenizer); the thread, holding the weights, must be gone once ``load`` has
raised. The others pin the actor's contract with a stand-in engine: a cancelled load is unloaded too, and an
``unload`` that fails is logged without hiding the load's own error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import ModelActor
from xinference.engines import registry
from xinference.engines.base import Engine, Verdict
from xinference.errors import LaunchFailed
from xinference.model.registry import ModelRegistry

SMOLLM2 = ModelRegistry().get("smollm2-instruct")
PYTORCH = next(s for s in SMOLLM2.model_specs if s.model_format == "pytorch")


def _plan(uid: str, engine: str, model_path: Path) -> LaunchPlan:
    from xinference.hardware import detect_hardware

    return LaunchPlan(
        model_uid=uid,
        replica_uid=f"{uid}-0",
        model_engine=engine,
        family=SMOLLM2.model_dump(mode="json"),
        spec=PYTORCH.model_dump(mode="json"),
        quantization="none",
        engine_config={},
        hardware=detect_hardware().model_dump(mode="json"),
        model_path=str(model_path),
    )


def _alive(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


@pytest.mark.slow
def test_a_load_failing_after_the_decode_thread_started_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from benchmark._weights import converted_smollm2
    from xinference.engines.transformers.engine import TransformersEngine

    def broken_stop_ids(self: TransformersEngine, model: Any, tokenizer: Any) -> frozenset[int]:
        raise RuntimeError("injected: the tokenizer could not be read")

    monkeypatch.setattr(TransformersEngine, "_collect_stop_ids", broken_stop_ids)
    actor = ModelActor(_plan("leak-check", "Transformers", converted_smollm2()))
    with pytest.raises(RuntimeError, match="injected"):
        asyncio.run(actor.load())
    assert not _alive("tf-leak-check"), "the decode thread (and the weights it holds) outlived the failed load"
    assert actor._engine is None


class _StandInConfig(BaseModel):
    model_config = {"extra": "forbid"}


class _StandIn(Engine):
    """Starts a thread in ``load``, then fails (or hangs, to be cancelled); ``unload`` stops the thread (and then
    raises, when told to)."""

    name: ClassVar[str] = "StandIn"
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    config_class = _StandInConfig
    hang = False
    unload_fails = False
    unloads = 0

    @classmethod
    def check_lib(cls) -> Verdict:
        return Verdict.ok()

    async def load(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._stop.wait, name="stand-in-worker", daemon=True)
        self._thread.start()
        if self.hang:
            await asyncio.Event().wait()
        raise LaunchFailed("the stand-in refuses to load")

    async def unload(self) -> None:
        type(self).unloads += 1
        self._stop.set()
        self._thread.join(5)
        if self.unload_fails:
            raise RuntimeError("unload broke too")


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch) -> type[_StandIn]:
    monkeypatch.setattr(registry, "get_engine_class", lambda name: _StandIn)
    monkeypatch.setattr(_StandIn, "unloads", 0)
    return _StandIn


def test_failed_load_is_unloaded_and_its_error_kept(stand_in: type[_StandIn], tmp_path: Path) -> None:
    actor = ModelActor(_plan("stand-in", "StandIn", tmp_path))
    with pytest.raises(LaunchFailed, match="refuses to load"):
        asyncio.run(actor.load())
    assert stand_in.unloads == 1 and not _alive("stand-in-worker")
    asyncio.run(actor.unload())  # the actor's own unload later (its destroy) does not unload it twice
    assert stand_in.unloads == 1


def test_cancelled_load_is_unloaded(stand_in: type[_StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stand_in, "hang", True)
    actor = ModelActor(_plan("stand-in", "StandIn", tmp_path))

    async def scenario() -> None:
        task = asyncio.create_task(actor.load())
        for _ in range(200):
            if _alive("stand-in-worker"):
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert stand_in.unloads == 1 and not _alive("stand-in-worker")


def test_failing_unload_is_logged_not_raised_over_the_load_error(
    stand_in: type[_StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(stand_in, "unload_fails", True)
    actor = ModelActor(_plan("stand-in", "StandIn", tmp_path))
    with caplog.at_level(logging.WARNING, logger="xinference.core.model_actor"):
        with pytest.raises(LaunchFailed, match="refuses to load"):
            asyncio.run(actor.load())
    assert stand_in.unloads == 1
    assert any("unloading after a failed load failed too" in r.getMessage() for r in caplog.records)
