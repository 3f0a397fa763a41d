"""The launch history (``core/supervisor/autostart.py``) is written off the supervisor's event loop: a launch or a
termination returns without waiting on the disk, the changes land in the order they were made (a burst shares one
rewrite of the file), and a read sees every change made before it."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from xinference import settings
from xinference.core.supervisor.autostart import History, LaunchHistory
from xinference.core.supervisor.models import ModelTable


def _history(file: LaunchHistory | None = None) -> History:
    """The supervisor's launch history over an empty model table, as SupervisorActor builds it, without an actor."""
    return History(file or LaunchHistory(settings.home_dir() / "launch_history.json"), ModelTable())


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    return tmp_path


def _slow_writes(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[str]:
    """Each write takes ``seconds`` and records the thread it ran on."""
    threads: list[str] = []
    real = LaunchHistory._write

    def slow(self: LaunchHistory, entries: list[dict[str, Any]]) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        real(self, entries)

    monkeypatch.setattr(LaunchHistory, "_write", slow)
    return threads


def test_writes_leave_the_loop_and_land_in_order(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = _slow_writes(monkeypatch, 0.1)
    sup = _history()

    async def scenario() -> tuple[float, list[dict[str, Any]]]:
        began = time.perf_counter()
        sup.remember("a", {"model_name": "x", "autostart": True}, "llama.cpp")
        sup.remember("b", {"model_name": "y"}, "vLLM")
        sup.forget("a")
        sup.remember("c", {"model_name": "z", "autostart": True}, "MLX")
        returned = time.perf_counter() - began
        return returned, await sup.listing()  # queued behind the four changes

    returned, listed = asyncio.run(scenario())
    assert returned < 0.1  # the writes (0.1 s each) went on without the loop waiting for them
    assert 1 <= len(threads) <= 2 and all(name.startswith("launch-history") for name in threads)
    assert threading.current_thread().name not in threads
    assert [e["model_uid"] for e in listed] == ["c", "b", "a"]  # newest first
    by_uid = {e["model_uid"]: e for e in listed}
    assert by_uid["a"]["autostart"] is False and by_uid["a"]["terminated_at"] is not None
    assert by_uid["c"]["autostart"] is True and by_uid["b"]["model_engine"] == "vLLM"
    assert all(e["status"] == "not running" for e in listed)
    on_disk = json.loads((home / "launch_history.json").read_text(encoding="utf-8"))
    assert [e["model_uid"] for e in on_disk] == ["a", "b", "c"] and not (home / "launch_history.tmp").exists()


def test_a_burst_of_launches_shares_the_rewrites(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = _slow_writes(monkeypatch, 0.05)
    sup = _history()

    async def scenario() -> list[dict[str, Any]]:
        for i in range(30):
            sup.remember(f"m{i:02d}", {"model_name": "x", "autostart": i % 2 == 0}, "llama.cpp")
        sup.forget("m00")
        return await sup.listing()

    listed = asyncio.run(scenario())
    assert len(threads) <= 2  # the first write, and the one every later change waited for (not 31)
    assert [e["model_uid"] for e in listed] == [f"m{i:02d}" for i in reversed(range(30))]
    assert [e["autostart"] for e in listed[-3:]] == [True, False, False]  # m02, m01, m00 (terminated)
    launched = [e["launched_at"] for e in reversed(listed)]
    assert launched == sorted(launched)  # the time of each launch, not of the write that recorded it


def test_the_request_is_taken_as_it_was_at_the_call(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_writes(monkeypatch, 0.05)
    sup = _history()
    request: dict[str, Any] = {"model_name": "x", "engine_kwargs": {"n_ctx": 2048}}

    async def scenario() -> list[dict[str, Any]]:
        sup.remember("a", request, "llama.cpp")
        request["engine_kwargs"]["n_ctx"] = 1  # the record's own dict changes after the launch
        return await sup.listing()

    assert asyncio.run(scenario())[0]["request"]["engine_kwargs"] == {"n_ctx": 2048}


def test_a_failed_write_is_logged_and_the_next_read_is_empty(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = home / "blocked"
    blocked.write_text("a file where the history's folder should be", encoding="utf-8")
    sup = _history(LaunchHistory(blocked / "launch_history.json"))

    async def scenario() -> list[dict[str, Any]]:
        sup.remember("a", {"model_name": "x"}, "llama.cpp")  # raises nothing here
        return await sup.listing()

    with caplog.at_level(logging.WARNING, logger="xinference.core.supervisor.autostart"):
        assert asyncio.run(scenario()) == []
    assert any("could not write the launch history" in r.getMessage() for r in caplog.records)
