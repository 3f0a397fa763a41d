"""A real cluster on loopback: a supervisor and two workers as separate processes, with separate homes.

One scenario, in order (each step builds on the last): replicas spread over both workers; a worker killed with
SIGKILL leaves the routes within the bound while requests keep succeeding; a model process killed with SIGKILL is
restarted by its worker; a supervisor killed and restarted gets its workers and their models back, still serving.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.conftest import free_port

TIMEOUT = 4.0  # XINFERENCE_WORKER_TIMEOUT for this test (default 12 s)
ENV = {"XINFERENCE_WORKER_TIMEOUT": str(TIMEOUT), "XINFERENCE_HEARTBEAT_INTERVAL": "1"}


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.supervisor_port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        home = self.root / name
        home.mkdir(exist_ok=True)
        log = (home / "process.out").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "xinference.deploy.cluster", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **ENV, "XINFERENCE_HOME": str(home)},
        )
        self.processes[name] = process
        return process

    def start_supervisor(self) -> None:
        self.start("supervisor", "supervisor", "--port", str(self.port), "--supervisor-port", str(self.supervisor_port))
        wait_for(lambda: _ok(f"{self.endpoint}/v1/cluster/auth"), 30, "the supervisor to answer")

    def start_worker(self, name: str) -> None:
        self.start(name, "worker", "-e", self.endpoint)

    def get(self, path: str) -> Any:
        return httpx.get(f"{self.endpoint}{path}", timeout=30).json()

    def chat(self) -> httpx.Response:
        return httpx.post(
            f"{self.endpoint}/v1/chat/completions",
            timeout=60,
            json={"model": "smollm2-instruct", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        )

    def workers(self) -> list[str]:
        return [w["address"] for w in self.get("/v1/workers")]

    def stop_all(self) -> None:
        everything = []
        for process in self.processes.values():
            try:
                everything += [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(everything, timeout=20)
        for proc in alive:
            proc.kill()


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def _model_children(process: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(process.pid).children(recursive=True)


def test_cluster_survives_worker_model_and_supervisor_failures(cluster: Cluster) -> None:
    launched = httpx.post(
        f"{cluster.endpoint}/v1/models",
        timeout=180,
        json={"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "replica": 2},
    )
    assert launched.status_code == 200, launched.text
    info = cluster.get("/v1/models/smollm2-instruct")
    assert len({r["worker_address"] for r in info["replicas"]}) == 2  # one replica on each worker
    assert all(cluster.chat().status_code == 200 for _ in range(4))

    # 1. a worker dies: it leaves /v1/workers within the bound; requests keep succeeding meanwhile
    victim = cluster.processes["worker-a"]
    victim_children = _model_children(victim)
    victim.kill()
    killed_at = time.monotonic()
    statuses = [cluster.chat().status_code for _ in range(6)]
    served_in = time.monotonic() - killed_at
    assert statuses == [200] * 6, statuses
    wait_for(lambda: len(cluster.workers()) == 1, TIMEOUT + 5, "the dead worker to leave")
    detection = time.monotonic() - killed_at
    _, orphans = psutil.wait_procs(victim_children, timeout=5)
    assert not orphans, "the dead worker's model process must exit on its own"
    events = [e["event"] for e in cluster.get("/v1/models/smollm2-instruct/events")["events"]]
    assert "replica_lost" in events
    assert cluster.get("/v1/models/smollm2-instruct")["status"] == "degraded"

    # 2. a model process dies: its worker reports it and restarts it
    [model_process] = _model_children(cluster.processes["worker-b"])
    model_process.kill()
    restarted_at = time.monotonic()

    def restarted() -> bool:
        events = [e["event"] for e in cluster.get("/v1/models/smollm2-instruct/events")["events"]]
        return "replica_restarted" in events

    wait_for(restarted, 60, "the model process to be restarted")
    recovery = time.monotonic() - restarted_at
    assert "exited with code" in " ".join(
        e["message"] for e in cluster.get("/v1/models/smollm2-instruct/events")["events"]
    )
    wait_for(lambda: cluster.chat().status_code == 200, 30, "the restarted replica to serve")

    # 3. the supervisor dies and comes back: the worker re-registers with its running model, no relaunch
    pid_before = [p.pid for p in _model_children(cluster.processes["worker-b"])]
    cluster.processes["supervisor"].kill()
    cluster.processes["supervisor"].wait()
    cluster.start_supervisor()
    wait_for(lambda: _ok(f"{cluster.endpoint}/v1/models/smollm2-instruct"), 20, "the model to be re-adopted")
    assert cluster.chat().status_code == 200
    assert [p.pid for p in _model_children(cluster.processes["worker-b"])] == pid_before
    print(
        f"6 requests after the worker kill served in {served_in:.1f}s; worker loss detected in {detection:.1f}s; "
        f"model process restarted in {recovery:.1f}s"
    )


def test_restarted_worker_relaunches_its_models(cluster: Cluster) -> None:
    body = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_ctx": 1024}
    assert httpx.post(f"{cluster.endpoint}/v1/models", json=body, timeout=180).status_code == 200
    hosting = next(n for n in ("worker-a", "worker-b") if _model_children(cluster.processes[n]))
    cluster.processes[hosting].send_signal(signal.SIGTERM)
    cluster.processes[hosting].wait(30)
    wait_for(
        lambda: cluster.get("/v1/models/smollm2-instruct")["status"] == "unavailable",
        15,
        "the model to lose its only replica",
    )
    assert cluster.chat().status_code == 503
    cluster.start_worker(hosting)  # same XINFERENCE_HOME: it relaunches what it ran
    wait_for(lambda: cluster.get("/v1/models/smollm2-instruct")["status"] == "ready", 60, "the relaunch")
    assert cluster.chat().status_code == 200
    assert cluster.get("/v1/models/smollm2-instruct")["engine_config"]["n_ctx"] == 1024


def test_scale_replicas_up_and_down_with_the_official_client(cluster: Cluster) -> None:
    from xinference_client import RESTfulClient

    client = RESTfulClient(cluster.endpoint)
    uid = client.launch_model(model_name="smollm2-instruct", model_engine="llama.cpp", n_ctx=1024)
    added = client.add_model_replica(uid)
    assert added["replica"] == 2
    info = cluster.get(f"/v1/models/{uid}")
    assert len({r["worker_address"] for r in info["replicas"]}) == 2  # the new replica went to the idle worker
    from xinference.client import Client

    with Client(cluster.endpoint) as ours:  # each worker lists the replica it runs (Xinference's workers shape)
        hosted = {w["work-ip"]: set(w["models"]) for w in ours.get_workers_info()}
        assert sorted(hosted.values(), key=sorted) == [{f"{uid}-0"}, {f"{uid}-1"}]
        [instance] = ours.get_instance_info(model_uid=uid)
        assert {r["worker_address"] for r in instance["replica_statuses"]} == set(hosted)
    assert all(cluster.chat().status_code == 200 for _ in range(4))
    assert client.terminate_model_replica(uid, 0) == 1
    assert [r["replica_uid"] for r in cluster.get(f"/v1/models/{uid}")["replicas"]] == [f"{uid}-1"]
    assert cluster.chat().status_code == 200
    last = httpx.delete(f"{cluster.endpoint}/v1/models/{uid}/replicas/1")
    assert last.status_code == 400 and "last replica" in last.json()["error"]["message"]
    assert httpx.delete(f"{cluster.endpoint}/v1/models/{uid}/replicas/7").status_code == 404
