"""A model process that exits before its xoscar pool comes up: the launch names the root cause (the import that
failed in that Python), not xoscar's bare "Start sub pool failed". A real main pool and a real subprocess; the only
thing chosen for the test is the Python the process starts with (an engine env that cannot import xoscar, as an
overlay env pointing at a deleted main environment once was)."""

from __future__ import annotations

import asyncio
import venv
from pathlib import Path

import pytest
import xoscar as xo

from tests.conftest import free_port
from tests.core.plans import replica_plan
from xinference.core.worker import WorkerActor
from xinference.core.worker import actor as worker_module
from xinference.core.worker.replica import why_process_did_not_start
from xinference.errors import LaunchFailed


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing installed: its Python cannot import xoscar."""
    root = tmp_path_factory.mktemp("bare-env")
    venv.create(root, with_pip=False)
    return root / "bin" / "python"


def test_the_cause_is_the_import_that_fails(bare_python: Path) -> None:
    assert why_process_did_not_start(str(bare_python), {}) == "ModuleNotFoundError: No module named 'xoscar'"


def test_no_cause_when_the_process_imports_fine() -> None:
    assert why_process_did_not_start(None, {}) == ""


def test_a_python_that_is_missing_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "python"
    assert why_process_did_not_start(str(missing), {}).startswith(f"{missing} could not run:")


@pytest.mark.timeout(120)
def test_a_launch_whose_process_cannot_start_says_why(
    bare_python: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path))
    monkeypatch.setattr(worker_module, "engine_process", lambda cls, plan: (str(bare_python), {}))

    async def scenario() -> tuple[BaseException | None, WorkerActor]:
        pool = await xo.create_actor_pool(f"127.0.0.1:{free_port()}", n_process=0, auto_recover=False)
        try:
            worker = WorkerActor(main_pool=pool)
            try:
                await worker.launch_replica(replica_plan())
            except Exception as exc:  # noqa: BLE001 - the outcome under test
                return exc, worker
            return None, worker
        finally:
            await pool.stop()

    outcome, worker = asyncio.run(scenario())
    assert isinstance(outcome, LaunchFailed), outcome
    assert outcome.message == (
        f"the model process did not start with {bare_python}: ModuleNotFoundError: No module named 'xoscar'"
    )
    assert worker._replicas == {}  # nothing left behind: the next launch of m-0 starts clean
