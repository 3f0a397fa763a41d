"""The supervisor's ``GET /metrics`` covers every worker of a real cluster on loopback (a supervisor and two workers
as separate processes): each worker's machine series, pulled from it at scrape time, and each replica's process
series labelled with the worker that runs it, beside the requests the supervisor's API served."""

from __future__ import annotations

import httpx

from tests.api.test_metrics import scrape, value
from tests.cluster.test_cluster import Cluster

UID = "cluster-metrics"


def test_supervisor_metrics_cover_every_worker(cluster: Cluster) -> None:
    launched = httpx.post(
        f"{cluster.endpoint}/v1/models",
        timeout=180,
        json={"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_uid": UID, "replica": 2},
    )
    assert launched.status_code == 200, launched.text
    hosts = {r["worker_address"] for r in cluster.get(f"/v1/models/{UID}")["replicas"]}
    workers = set(cluster.workers())
    assert hosts == workers  # one replica on each worker
    for _ in range(2):
        reply = httpx.post(
            f"{cluster.endpoint}/v1/chat/completions",
            timeout=60,
            json={"model": UID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
        )
        assert reply.status_code == 200, reply.text

    page = scrape(cluster.endpoint)

    def labelled(name: str, label: str, **labels: str) -> set[str]:
        return {dict(ls)[label] for (n, ls), _ in page.items() if n == name and set(labels.items()) <= set(ls)}

    for name in (
        "xinference:worker_cpu_count",
        "xinference:worker_memory_total_bytes",
        "xinference:worker_heartbeat_age_seconds",
        "xinference:worker_cpu_utilization",
    ):
        assert labelled(name, "worker") == workers, name  # the last one is pulled from each worker at scrape time
    for worker in workers:
        assert value(page, "xinference:worker_cpu_count", worker=worker) >= 1
        assert value(page, "xinference:worker_memory_total_bytes", worker=worker) > 0
        assert value(page, "xinference:replica_memory_rss_bytes", worker=worker, model_name=UID) > 50 * 2**20
        assert value(page, "xinference:replica_cpu_seconds_total", worker=worker, model_name=UID) > 0
    assert labelled("xinference:replica_memory_rss_bytes", "replica", model_name=UID) == {f"{UID}-0", f"{UID}-1"}
    labels = {"model_name": UID, "engine": "llama.cpp"}
    assert value(page, "xinference:requests_total", route="/v1/chat/completions", outcome="success", **labels) == 2
    assert value(page, "xinference:model_replicas", **labels) == 2
