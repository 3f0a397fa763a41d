"""``GET /metrics`` over HTTP on the shared server: the page parses with prometheus-client's own parser, counters
move by exactly what known requests did, the TTFT histogram counts the streams, scraping during streams adds no
error, and the page follows the API keys unless ``XINFERENCE_METRICS_PUBLIC=1``."""

from __future__ import annotations

import concurrent.futures
import json
import re
import threading
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server

pytestmark = pytest.mark.slow

UID = "metrics-smollm"
CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say something about the sea."}]


def scrape(endpoint: str, **kwargs: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the page, keyed by (name, sorted labels); the page must parse."""
    response = httpx.get(f"{endpoint}/metrics", timeout=30, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


@pytest.fixture(scope="module")
def metrics_model(local_server: LocalServer) -> Iterator[str]:
    response = httpx.post(
        f"{local_server.api}/models",
        timeout=300,
        json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp", "model_uid": UID},
    )
    assert response.status_code == 200, response.text
    try:
        yield UID
    finally:
        httpx.delete(f"{local_server.api}/models/{UID}", timeout=60)


def _stream(endpoint: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    with httpx.stream("POST", f"{endpoint}{CHAT}", json={**body, "stream": True}, timeout=120) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    assert chunks and "error" not in chunks[-1]
    return chunks


def test_counters_move_by_what_known_requests_did(local_server: LocalServer, metrics_model: str) -> None:
    endpoint = local_server.endpoint
    labels = {"model_name": metrics_model, "engine": "llama.cpp"}
    before = scrape(endpoint)
    body = {"model": metrics_model, "messages": MESSAGES, "max_tokens": 6, "temperature": 0}
    usages = []
    for _ in range(2):
        reply = httpx.post(f"{endpoint}{CHAT}", json=body, timeout=120)
        assert reply.status_code == 200
        usages.append(reply.json()["usage"])
    for _ in range(2):
        chunks = _stream(endpoint, {**body, "stream_options": {"include_usage": True}})
        usages.append(chunks[-1]["usage"])
    unasked = _stream(endpoint, body)  # usage not asked for: the client gets none, the metrics still count it
    assert all("usage" not in chunk for chunk in unasked)
    bad = httpx.post(f"{endpoint}{CHAT}", json={**body, "n": 2}, timeout=60)  # llama.cpp refuses n > 1
    assert bad.status_code == 400
    after = scrape(endpoint)

    def moved(name: str, **extra: str) -> float:
        return value(after, name, **labels, **extra) - value(before, name, **labels, **extra)

    prompt = usages[0]["prompt_tokens"]
    assert all(u["prompt_tokens"] == prompt for u in usages)
    assert moved("xinference:requests_total", route=CHAT, outcome="success") == 5
    assert moved("xinference:requests_total", route=CHAT, outcome="client_error") == 1
    assert moved("xinference:request_errors_total", error_type="unsupported_option") == 1
    assert moved("xinference:prompt_tokens_total") == 5 * prompt  # the refused n=2 request read no prompt
    known = sum(u["completion_tokens"] for u in usages)
    generated = moved("xinference:generation_tokens_total")
    assert known + 1 <= generated <= known + 6  # plus the stream whose usage the client did not ask for
    assert moved("xinference:time_to_first_token_seconds_count") == 3  # one per stream
    assert moved("xinference:e2e_request_latency_seconds_count") == 5  # successful requests only
    assert moved("xinference:request_queue_time_seconds_count") == 6
    assert 0 < moved("xinference:time_to_first_token_seconds_sum") < moved("xinference:e2e_request_latency_seconds_sum")
    assert value(after, "xinference:model_status", **labels, status="ready") == 1
    assert value(after, "xinference:model_status", **labels, status="unloaded") == 0
    assert value(after, "xinference:model_replicas", **labels) == 1
    assert value(after, "xinference:max_running_requests", **labels) == 4  # llama.cpp's 4 CPU slots
    assert value(after, "xinference:model_load_duration_seconds", **labels) > 0
    assert value(after, "xinference:num_requests_running", **labels) == 0


def test_page_names_and_worker_series(local_server: LocalServer, metrics_model: str) -> None:
    text = httpx.get(f"{local_server.endpoint}/metrics", timeout=30).text
    names = {family.name for family in text_string_to_metric_families(text)}
    for name in (
        "xinference:requests",
        "xinference:request_errors",
        "xinference:prompt_tokens",
        "xinference:generation_tokens",
        "xinference:time_to_first_token_seconds",
        "xinference:inter_token_latency_seconds",
        "xinference:e2e_request_latency_seconds",
        "xinference:request_queue_time_seconds",
        "xinference:num_requests_running",
        "xinference:num_requests_waiting",
        "xinference:model_status",
        "xinference:model_replicas",
        "xinference:worker_cpu_count",
        "xinference:worker_memory_total_bytes",
        "xinference:replica_memory_rss_bytes",
    ):
        assert name in names, name
    samples = scrape(local_server.endpoint)
    assert value(samples, "xinference:worker_cpu_count") >= 1
    assert value(samples, "xinference:replica_memory_rss_bytes", model_name=metrics_model) > 50 * 2**20
    assert "_created" not in text


def test_scraping_during_streams_adds_no_error(local_server: LocalServer, metrics_model: str) -> None:
    endpoint = local_server.endpoint
    body = {"model": metrics_model, "messages": MESSAGES, "max_tokens": 40, "ignore_eos": True}
    before = scrape(endpoint)
    stop = threading.Event()
    seen_running: list[float] = []
    failures: list[str] = []

    def keep_scraping() -> None:
        while not stop.is_set():
            try:
                samples = scrape(endpoint)
                seen_running.append(value(samples, "xinference:num_requests_running", model_name=metrics_model))
            except AssertionError as exc:  # pragma: no cover - reported below
                failures.append(str(exc))
            stop.wait(0.2)

    scraper = threading.Thread(target=keep_scraping)
    scraper.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: _stream(endpoint, body), range(4)))
    finally:
        stop.set()
        scraper.join(30)
    assert not failures and len(seen_running) >= 2 and max(seen_running) >= 1
    assert all(any(c["choices"] and c["choices"][0].get("finish_reason") for c in r) for r in results)
    after = scrape(endpoint)
    labels = {"model_name": metrics_model, "engine": "llama.cpp"}
    assert (
        value(after, "xinference:requests_total", **labels, outcome="success")
        - value(before, "xinference:requests_total", **labels, outcome="success")
        == 4
    )
    assert (
        value(after, "xinference:time_to_first_token_seconds_count", **labels)
        - value(before, "xinference:time_to_first_token_seconds_count", **labels)
        == 4
    )
    assert value(after, "xinference:request_errors_total", **labels) == value(
        before, "xinference:request_errors_total", **labels
    )
    assert value(after, "xinference:num_requests_running", **labels) == 0


@pytest.mark.parametrize("public", [False, True])
def test_metrics_follow_api_keys_unless_public(tmp_path: Path, public: bool) -> None:
    env = {"XINFERENCE_API_KEYS": "sekrit"}
    if public:
        env["XINFERENCE_METRICS_PUBLIC"] = "1"
    server = start_local_server(tmp_path, env=env)
    try:
        anonymous = httpx.get(f"{server.endpoint}/metrics", timeout=30)
        assert anonymous.status_code == (200 if public else 401)
        keyed = httpx.get(f"{server.endpoint}/metrics", headers={"Authorization": "Bearer sekrit"}, timeout=30)
        assert keyed.status_code == 200 and "xinference:worker_cpu_count" in keyed.text
        assert httpx.get(f"{server.api}/models", timeout=30).status_code == 401  # the rest stays closed
    finally:
        server.stop()


def test_dashboard_and_docs_name_only_real_metrics(local_server: LocalServer, metrics_model: str) -> None:
    """Every metric the Grafana dashboard queries is on the page, and doc/operations.md names each family."""
    root = Path(__file__).resolve().parents[2]
    dashboard = json.loads((root / "doc" / "grafana-dashboard.json").read_text())
    queried = {
        re.sub(r"_(total|bucket|sum|count)$", "", m)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for m in re.findall(r"xinference:[a-z][a-z0-9_]*", target["expr"])
    }
    text = httpx.get(f"{local_server.endpoint}/metrics", timeout=30).text
    families = list(text_string_to_metric_families(text))
    exposed = {f.name for f in families}  # a family is listed (HELP, TYPE) even before its first sample
    assert len(queried) >= 15 and queried <= exposed, queried - exposed
    doc = (root / "doc" / "operations.md").read_text()
    for family in families:
        if family.name.startswith("xinference:") and not family.name.startswith("xinference:engine_"):
            assert family.name in doc, family.name
