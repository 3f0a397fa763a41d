"""Failover in a real cluster: two replicas of the bundled chat model on two workers, one of them killed with
SIGKILL (its worker, or its model process), and the requests that follow timed from outside.

The replica killed is the one the next request goes to (found from the model processes' CPU time: replicas that
tie take turns), so the first request after the kill meets the dead or dying replica and must fail over. The
worker tests use the default heartbeat and worker timeout: the supervisor declares the worker dead only 9-13 s
after the kill, so everything measured before that is the API's own failover.

The bound is on what the failover adds: the first request after the kill may take at most ``FAILOVER_BOUND``
more than a request served at the machine's pace then (the slowest of the last ones before the kill, or the
median of the ones after it, whichever is slower). On a quiet machine those take ~0.07 s, so this is the "< 1 s"
of the requirement. On a shared 2-core machine whose cores other work takes, and where the killed replica's
worker reloads it meanwhile, every request is slow (seconds: llama.cpp's threads wait on each other when
preempted), and an absolute bound would measure the machine instead of the failover.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import threading
import time
from typing import Any

import httpx
import psutil

from tests.cluster.test_cluster import Cluster, _model_children, wait_for

MODEL = "smollm2-instruct"
FAILOVER_BOUND = 1.0  # seconds the failover may add to the first request after a kill
FOLLOWING = 8


def _launch_two_replicas(cluster: Cluster) -> None:
    """Two replicas, one per worker. Here both workers share one machine: one thread each keeps the replicas from
    preempting each other's threads (on machines of their own they would not), so the timings are the failover's."""
    launched = httpx.post(
        f"{cluster.endpoint}/v1/models",
        timeout=180,
        json={
            "model_name": MODEL,
            "model_engine": "llama.cpp",
            "replica": 2,
            "n_ctx": 1024,
            "n_threads": 1,
            "n_threads_batch": 1,
        },
    )
    assert launched.status_code == 200, launched.text
    info = cluster.get(f"/v1/models/{MODEL}")
    assert len({r["worker_address"] for r in info["replicas"]}) == 2  # one replica on each worker


def _chat(cluster: Cluster, max_tokens: int = 1, prompt: str = "Hi", **options: Any) -> httpx.Response:
    return httpx.post(
        f"{cluster.endpoint}/v1/chat/completions",
        timeout=120,
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            **options,
        },
    )


def _replica_pids(cluster: Cluster) -> set[int]:
    return {r["pid"] for r in cluster.get(f"/v1/models/{MODEL}")["replicas"] if r.get("pid")}


def _model_processes(cluster: Cluster) -> dict[str, psutil.Process]:
    """worker name → its one model process: the child of that worker whose pid a replica of the model reports
    (a worker restarting a replica may briefly have another child, or the killed one not yet reaped)."""
    pids = _replica_pids(cluster)
    found = {}
    for name in ("worker-a", "worker-b"):
        children = [c for c in _model_children(cluster.processes[name]) if c.pid in pids]
        assert len(children) == 1, (name, children, pids)
        found[name] = children[0]
    return found


def _both_serve(cluster: Cluster, killed: int) -> bool:
    """Two replicas reported, neither the killed process, each a running child of its own worker."""
    pids = _replica_pids(cluster)
    if len(pids) != 2 or killed in pids:
        return False
    for name in ("worker-a", "worker-b"):
        live = [c for c in _model_children(cluster.processes[name]) if c.pid in pids and c.is_running()]
        if len(live) != 1 or live[0].status() == psutil.STATUS_ZOMBIE:
            return False
    return True


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


_PROMPTS = itertools.count()


def _served_by(cluster: Cluster, processes: dict[str, psutil.Process]) -> tuple[str, float]:
    """Send one request; the worker whose model process did the work (its CPU time moved most), and the time.

    Each prompt is new and asks for 8 tokens, so the replica that serves it prefills and decodes: a prompt it had
    seen would come from its prompt cache at a cost an idle process's own housekeeping can match (CI once read the
    idle replica as the one that served)."""
    before = {name: _cpu(p) for name, p in processes.items()}
    started = time.monotonic()
    prompt = f"Request {next(_PROMPTS)}: count from one to twenty in words."
    assert _chat(cluster, max_tokens=8, prompt=prompt).status_code == 200
    took = time.monotonic() - started
    moved = {name: _cpu(p) - before[name] for name, p in processes.items()}
    return max(moved, key=lambda name: moved[name]), took


def _next_replica(cluster: Cluster) -> tuple[str, float]:
    """Warm both replicas (they take turns); the worker whose replica the next request goes to, and the slower
    of two standard requests sent last, one to each replica (the machine's pace just before the kill).

    The API learns of a replica that became ready within a second (its route table follows the supervisor's
    version every second), so requests are sent until both replicas have served before turns are checked."""
    processes = _model_processes(cluster)
    deadline = time.monotonic() + 30
    while {_served_by(cluster, processes)[0] for _ in range(2)} != set(processes):
        assert time.monotonic() < deadline, "one replica never served"
        time.sleep(0.5)
    served = [_served_by(cluster, processes) for _ in range(4)]
    workers = [name for name, _ in served]
    assert workers in (["worker-a", "worker-b"] * 2, ["worker-b", "worker-a"] * 2), workers  # turns
    paces = []
    for _ in range(2):  # one turn each, so the next request still goes where the turns above say
        started = time.monotonic()
        assert _chat(cluster).status_code == 200
        paces.append(time.monotonic() - started)
    return ("worker-b" if workers[-1] == "worker-a" else "worker-a"), max(paces)


def _timed_requests(cluster: Cluster, pace: float, what: str) -> tuple[float, list[float]]:
    """The first request after a kill and the ``FOLLOWING`` ones, each timed; every one must succeed, and the
    first within ``FAILOVER_BOUND`` of the machine's pace (``pace`` before the kill, the median after it)."""
    times, statuses = [], []
    for _ in range(1 + FOLLOWING):
        started = time.monotonic()
        statuses.append(_chat(cluster).status_code)
        times.append(time.monotonic() - started)
    assert statuses == [200] * (1 + FOLLOWING), statuses
    first, following = times[0], times[1:]
    baseline = max(pace, statistics.median(following))
    assert first < baseline + FAILOVER_BOUND, (
        f"{what}: the first request after the kill took {first:.2f}s, a request at the machine's pace {baseline:.2f}s"
    )
    return first, following


def test_first_request_after_a_worker_is_killed_is_served_in_under_a_second(cluster_default_timeouts: Cluster) -> None:
    cluster = cluster_default_timeouts
    _launch_two_replicas(cluster)
    victim, pace = _next_replica(cluster)
    orphan = _model_processes(cluster)[victim]

    cluster.processes[victim].kill()
    killed_at = time.monotonic()
    first, following = _timed_requests(cluster, pace, "worker kill")

    wait_for(lambda: len(cluster.workers()) == 1, 20, "the dead worker to leave /v1/workers")
    left_after = time.monotonic() - killed_at
    # bound: the last heartbeat (at most 3 s before the kill) + 12 s timeout + the 1 s check, less a little
    assert left_after < 3 + 12 + 1 + 1, left_after
    orphan.wait(5)  # the orphaned model process exited by itself
    print(
        f"worker kill: first request {first:.3f}s, next {FOLLOWING} {sum(following):.3f}s (max "
        f"{max(following):.3f}s; before the kill {pace:.3f}s); the dead worker left /v1/workers {left_after:.1f}s "
        "after the kill"
    )


def test_first_request_after_a_model_process_is_killed_is_served_in_under_a_second(cluster: Cluster) -> None:
    """Three rounds: kill the replica next in turn, time the requests, wait for its worker to restart it."""
    _launch_two_replicas(cluster)
    report = []
    for round_ in range(3):
        victim, pace = _next_replica(cluster)
        killed = _model_processes(cluster)[victim]
        killed.kill()
        first, following = _timed_requests(cluster, pace, f"model process kill, round {round_}")
        report.append(f"{first:.3f}s + {sum(following):.3f}s (before the kill {pace:.3f}s)")
        wait_for(functools.partial(_both_serve, cluster, killed.pid), 90, "the killed replica to be restarted")
        wait_for(lambda: _chat(cluster).status_code == 200, 30, "the model to serve")
    print("model process kill, first request + next 8, per round: " + "; ".join(report))


def test_a_chat_in_flight_when_its_worker_dies_is_answered_by_the_other_replica(
    cluster_default_timeouts: Cluster,
) -> None:
    """A non-streamed chat whose replica's process exits mid-generation (its worker was killed, so it exits
    within a second) is retried on the other replica: the client gets a whole answer, not an error.

    The chat asks for 400 tokens whatever the model would end with (several seconds at one thread): a story the
    model ended on its own could be whole before the orphaned process noticed its worker was gone (seen on a
    2-core host)."""
    cluster = cluster_default_timeouts
    _launch_two_replicas(cluster)
    victim, _ = _next_replica(cluster)
    dying = _model_processes(cluster)[victim]
    answer: dict[str, Any] = {}

    def long_chat() -> None:
        response = _chat(cluster, max_tokens=400, prompt="Write a long story about a cat.", ignore_eos=True)
        answer.update(status=response.status_code, body=response.json(), at=time.monotonic())

    request = threading.Thread(target=long_chat)
    request.start()
    idle_cpu = _cpu(dying)
    wait_for(lambda: _cpu(dying) - idle_cpu > 0.3, 30, "the victim to generate")
    cluster.processes[victim].kill()
    dying.wait(5)
    exited_at = time.monotonic()
    request.join(120)
    assert answer["status"] == 200, answer
    assert answer["at"] > exited_at  # answered after the replica it started on was gone
    assert answer["body"]["choices"][0]["message"]["content"]
