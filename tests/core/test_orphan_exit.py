"""A model process whose worker was killed exits by itself (``model_actor.exit_when_orphaned``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

# The "worker": starts the "model process", prints its pid, then waits to be killed. The model process runs the
# real check (at a short interval, so that the test is quick) and would otherwise sleep for a minute.
_WORKER = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
import time
time.sleep(60)
"""
_MODEL = r"""
import asyncio, os
from xinference.core.model_actor import exit_when_orphaned
async def main():
    asyncio.get_running_loop().create_task(exit_when_orphaned(os.getppid(), interval=0.05))
    print("checking", flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie (a container's first process may never reap the orphan once it exits)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_model_process_exits_soon_after_its_worker_was_killed() -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, _MODEL], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert worker.stdout is not None
        model = psutil.Process(int(worker.stdout.readline()))
        assert worker.stdout.readline().strip() == "checking"
        time.sleep(0.3)
        assert _alive(model), "the model process exited while its worker lived"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(model) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(model), "the model process stayed behind its killed worker"
    finally:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
