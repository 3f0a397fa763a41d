"""A real cluster on loopback for the chaos soak: ``xinference-supervisor`` and N ``xinference-worker`` processes.

Each node has its own ``XINFERENCE_HOME`` under one root folder and a fixed actor port, as an operator's service
unit would give it, so a worker the chaos driver kills is started again with the same command line and home
(:meth:`LoopbackCluster.restart_worker`) and relaunches the replicas it ran. Every process started here is the
driver's child; :meth:`LoopbackCluster.stop` sends them SIGTERM and waits, and leaves whatever survives to the
caller's orphan check (:meth:`LoopbackCluster.reap` kills it afterwards).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark._proc import free_port
from benchmark.soak import start_time

__all__ = ["LoopbackCluster", "Node"]


@dataclass
class Node:
    """One platform process of the cluster and every incarnation it had (a worker restarted after a kill)."""

    name: str
    home: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    incarnations: int = 0
    #: the pid of every process this node ran, its past incarnations included
    pids: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tree(self) -> list[psutil.Process]:
        """The node's current process and its descendants (its model processes), those still alive."""
        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


class LoopbackCluster:
    """A supervisor (``supervisor``) and workers (``worker-0``, ``worker-1``, ...) under ``root``."""

    def __init__(self, root: Path, workers: int = 2, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._env = env or {}
        self.supervisor = self._node(
            "supervisor", ["supervisor", "--port", str(self.port), "--supervisor-port", str(free_port())]
        )
        self.workers: list[Node] = []
        for i in range(workers):
            port = free_port()
            node = self._node(f"worker-{i}", ["worker", "-e", self.endpoint, "--worker-port", str(port)])
            self.workers.append(node)

    def _node(self, name: str, args: list[str]) -> Node:
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        return Node(name, home, args)

    def worker_address(self, index: int) -> str:
        """The actor address worker ``index`` registers with (fixed for all its incarnations)."""
        return f"127.0.0.1:{self.workers[index].args[-1]}"

    @property
    def nodes(self) -> list[Node]:
        return [self.supervisor, *self.workers]

    def _spawn(self, node: Node) -> None:
        env = {**os.environ, **self._env, "XINFERENCE_HOME": str(node.home)}
        env.pop("XINFERENCE_API_KEYS", None)
        with (node.home / "process.out").open("ab") as out:
            node.process = subprocess.Popen(
                [sys.executable, "-m", "xinference.deploy.cluster", *node.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        node.incarnations += 1
        node.pids.append(node.process.pid)

    def start(self, timeout: float = 120.0) -> None:
        """Start the supervisor, then the workers; returns once every worker has joined."""
        self._spawn(self.supervisor)
        self._wait(lambda: self._get("/v1/cluster/auth") is not None, timeout, "the supervisor to answer")
        for node in self.workers:
            self._spawn(node)
        self._wait(lambda: len(self._get("/v1/workers") or ()) == len(self.workers), timeout, "every worker to join")

    def kill(self, node: Node) -> None:
        """SIGKILL the node's current process and reap it (its model processes are left to fend for themselves)."""
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(30)

    def restart_worker(self, node: Node) -> None:
        """Start the worker again, same command line and home, as its service manager would after a crash."""
        if node.alive():
            raise RuntimeError(f"{node.name} is still running")
        self._spawn(node)

    def stop(self, timeout: float = 60.0) -> list[str]:
        """SIGTERM every node and wait; returns the nodes that did not exit in time (they are then killed: the
        nodes are ours to stop, what they leave behind is the caller's to find)."""
        for node in self.nodes:
            if node.alive():
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        late = []
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                late.append(node.name)
                node.process.kill()
                node.process.wait(30)
        return late

    @staticmethod
    def reap(pids: Iterable[int], start_times: Mapping[int, float]) -> list[int]:
        """SIGKILL the listed processes that are still the ones seen (same start time: a pid reused since is
        someone else's process); returns those killed."""
        killed = []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if start_times.get(pid) == start_time(proc):
                    proc.kill()
                    killed.append(pid)
        return killed

    def _get(self, path: str) -> Any:
        try:
            response = httpx.get(f"{self.endpoint}{path}", timeout=5, trust_env=False)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if self.supervisor.process is not None and self.supervisor.process.poll() is not None:
                raise RuntimeError(f"the supervisor exited with code {self.supervisor.process.returncode}")
            time.sleep(0.3)
        raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
