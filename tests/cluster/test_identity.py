"""Replica identity on a real cluster: a model terminated while its worker was cut off does not come back when the
worker does, a hung worker does not hold up launches on the other one, and a supervisor restart with autostart
does not start a second copy of a model a worker still runs.

A partition is made with SIGSTOP of the worker process (a host that stops answering without closing its
connections); its model process keeps running, as it would on a partitioned host.
"""

from __future__ import annotations

import time

import httpx
import psutil

from tests.cluster.test_cluster import TIMEOUT, Cluster, wait_for

SMOL = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_ctx": 512}


def _launch(cluster: Cluster, **extra: object) -> httpx.Response:
    return httpx.post(f"{cluster.endpoint}/v1/models", json={**SMOL, **extra}, timeout=180)


def _address_of(cluster: Cluster, name: str) -> str:
    """The actor address of worker ``name`` (the one whose process has that name's pid among its connections)."""
    pid = cluster.processes[name].pid
    ports = {c.laddr.port for c in psutil.Process(pid).net_connections(kind="tcp") if c.status == "LISTEN"}
    return next(a for a in cluster.workers() if int(a.rsplit(":", 1)[1]) in ports)


def _models(cluster: Cluster) -> dict[str, dict[str, object]]:
    return {m["id"]: m for m in cluster.get("/v1/models")["data"]}


def _model_processes(cluster: Cluster, name: str) -> list[psutil.Process]:
    return psutil.Process(cluster.processes[name].pid).children(recursive=True)


def test_a_model_terminated_during_a_partition_is_killed_when_the_worker_returns(cluster: Cluster) -> None:
    a, b = _address_of(cluster, "worker-a"), _address_of(cluster, "worker-b")
    started = time.monotonic()
    assert _launch(cluster, model_uid="cut", worker_ip=a).status_code == 200
    print(f"first launch: {time.monotonic() - started:.1f}s")
    [orphan] = _model_processes(cluster, "worker-a")

    worker_a = psutil.Process(cluster.processes["worker-a"].pid)
    worker_a.suspend()  # partitioned: it answers nothing, its connections stay open
    try:
        started = time.monotonic()
        other = _launch(cluster, model_uid="elsewhere", worker_ip=b)  # launches on the other worker go on
        assert other.status_code == 200, other.text
        launched_in = time.monotonic() - started
        wait_for(lambda: a not in cluster.workers(), TIMEOUT + 6, "the silent worker to be declared gone")
        assert httpx.delete(f"{cluster.endpoint}/v1/models/cut", timeout=30).status_code == 200
        assert "cut" not in _models(cluster)
    finally:
        worker_a.resume()

    wait_for(lambda: a in cluster.workers(), 15, "the worker to re-register")
    gone, _ = psutil.wait_procs([orphan], timeout=30)
    assert gone, "the replica of the terminated model must be stopped, not adopted"
    assert "cut" not in _models(cluster)
    assert "elsewhere" in _models(cluster)
    print(f"launch on the other worker while one hung: {launched_in:.1f}s")


def test_a_supervisor_restart_with_autostart_starts_no_second_copy(cluster: Cluster) -> None:
    assert _launch(cluster, model_uid="kept", autostart=True).status_code == 200
    host = next(n for n in ("worker-a", "worker-b") if _model_processes(cluster, n))
    [before] = _model_processes(cluster, host)

    cluster.processes["supervisor"].kill()
    cluster.processes["supervisor"].wait()
    late = psutil.Process(cluster.processes[host].pid)
    late.suspend()  # the worker running the model re-registers late: the other one joins the new supervisor first
    try:
        cluster.start_supervisor()
        wait_for(lambda: len(cluster.workers()) == 1, 15, "the other worker to re-register")
    finally:
        late.resume()
    wait_for(lambda: len(cluster.workers()) == 2, 15, "the late worker to re-register")
    wait_for(lambda: _models(cluster).get("kept", {}).get("status") == "ready", 60, "the model to serve")
    time.sleep(5.0)  # past the autostart grace (two heartbeats and a second) and any launch it made

    info = cluster.get("/v1/models/kept")
    assert len(info["replicas"]) == 1, info["replicas"]
    processes = _model_processes(cluster, "worker-a") + _model_processes(cluster, "worker-b")
    alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert len(alive) == 1, f"one copy of the model must run, found {len(alive)}"
    assert (
        httpx.post(
            f"{cluster.endpoint}/v1/chat/completions",
            timeout=60,
            json={"model": "kept", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        ).status_code
        == 200
    )
    print(f"the copy that ran before the restart was {'kept' if before.is_running() else 'replaced'}")
