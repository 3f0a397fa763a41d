"""Issue 13, item 9 (blocking work on event loops): persisting a registration (write, fsync, rename) runs off the
supervisor's event loop, which also serves heartbeats and launches."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest
import xoscar as xo

from xinference.core.supervisor import SupervisorActor


def test_persisting_a_registration_does_not_fsync_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "tiny.Q4_1.gguf").write_bytes(b"GGUF")
    synced_on: list[str] = []
    real_fsync = os.fsync

    def watched_fsync(fd: int) -> None:  # observes where the real fsync runs; still syncs
        synced_on.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched_fsync)
    family = {
        "model_name": "io-check",
        "model_type": "LLM",
        "model_ability": ["chat"],
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": 1,
                "quantizations": ["Q4_1"],
                "model_uri": f"file://{weights}",
            }
        ],
    }

    async def main() -> str:
        pool = await xo.create_actor_pool("127.0.0.1", n_process=0)
        try:
            supervisor = await xo.create_actor(
                SupervisorActor, address=pool.external_address, uid=SupervisorActor.default_uid()
            )
            await supervisor.register_model("LLM", family, True)
            return threading.current_thread().name
        finally:
            await pool.stop()

    loop_thread = asyncio.run(main())
    assert synced_on, "the registration was not persisted"
    assert loop_thread not in synced_on, "fsync ran on the supervisor's event loop thread"
    assert (tmp_path / "registrations" / "llm" / "io-check.json").is_file()
