"""``GET /metrics``: Prometheus text format, names under ``xinference:`` in vLLM's habits.

Two kinds of series:

- **Per request**, kept in this API process (every model request of the cluster passes through it): requests by
  outcome and route, errors by type, refusals, prompt and generation tokens, and the time-to-first-token,
  inter-token, end-to-end and queue-time histograms. They are recorded once per request, when its admission
  ticket is left (``api/gateway/admission.py``), from a few timestamps and the response's ``usage``: nothing per token.
  The inter-token latency is each stream's mean gap between tokens after the first, observed once per stream.
- **At scrape time**, read then: running and waiting requests and the limits (the admission gates), each model's
  status, replicas and load duration (the supervisor), every worker's CPU, memory and GPUs with each replica's
  process CPU and RSS (the workers), and the engine's own counters (``Engine.stats()`` of every replica: vLLM's
  and SGLang's server metrics, batching and speculative-decoding counters), each as ``xinference:engine_<name>``.

Covered by API keys like every route, unless ``XINFERENCE_METRICS_PUBLIC=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any, Iterable, Iterator

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from xinference.api.gateway.admission import Ticket, current_route
from xinference.core.refs import ReplicaRef, SupervisorRef
from xinference.engines.base import Chunk, chunk_dict, chunk_dicts

__all__ = ["MODEL_STATUSES", "Metrics", "RouteLabelMiddleware", "attach_router", "observe_batch", "with_usage"]

logger = logging.getLogger(__name__)

#: Every status a model can have: ``xinference:model_status`` has one series per status (1 for the current one).
MODEL_STATUSES = ("launching", "ready", "degraded", "unavailable", "failed", "unloading", "unloaded")
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0)
_TOKEN_GAP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
_SCRAPE_TIMEOUT = 2.0


def with_usage(params: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(whether the client asked for usage, params asking the engine for it): a stream's last chunk then
    carries its token counts, and :func:`observe_batch` removes it again when the client did not ask."""
    options = params.get("stream_options") or {}
    if options.get("include_usage"):
        return True, params
    return False, {**params, "stream_options": {**options, "include_usage": True}}


def _carries_text(batch: Iterable[dict[str, Any]]) -> bool:
    for chunk in batch:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if choice.get("text") or delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
                return True
    return False


def observe_batch(ticket: Ticket, batch: list[Chunk], keep_usage: bool) -> list[Chunk]:
    """Note a streamed batch on its ticket (first token, final usage): a check per batch, never per token.
    Returns the batch, without the usage the client did not ask for.

    Chunks passed through as JSON text (``engines.base.Chunk``) are decoded only where a field must be read: until
    the first text is seen (the first batches), and the last chunk of a batch when its text names ``usage``."""
    if ticket.first_token is None and _carries_text(chunk_dicts(batch)):
        ticket.mark_first_token()
    if not batch:
        return batch
    last_item = batch[-1]
    if isinstance(last_item, bytes) and b'"usage"' not in last_item:
        return batch  # the common case: a token chunk, passed on without a decode
    last = chunk_dict(last_item)
    if last.get("usage"):
        ticket.count_usage(last["usage"])
        if not keep_usage:
            if last.get("choices"):
                batch = [*batch[:-1], {k: v for k, v in last.items() if k != "usage"}]
            else:
                batch = batch[:-1]
    return batch


class Metrics:
    """The per-request instruments of one API process; the admission gates report finished tickets here."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no ``*_created`` series (as vLLM): they double the page for nothing
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("model_name", "engine")
        reg = self.registry
        self.requests = Counter(
            "xinference:requests",
            "Model requests by route and outcome (success, client_error, server_error, aborted, rejected).",
            (*labels, "route", "outcome"),
            registry=reg,
        )
        self.errors = Counter(
            "xinference:request_errors",
            "Failed model requests by error type.",
            (*labels, "route", "error_type"),
            registry=reg,
        )
        self.rejected_requests = Counter(
            "xinference:requests_rejected",
            "Requests refused by admission control (429): queue_full or queue_timeout.",
            (*labels, "route", "reason"),
            registry=reg,
        )
        self.prompt_tokens = Counter("xinference:prompt_tokens", "Prompt tokens processed.", labels, registry=reg)
        self.generation_tokens = Counter("xinference:generation_tokens", "Tokens generated.", labels, registry=reg)
        self.ttft = Histogram(
            "xinference:time_to_first_token_seconds",
            "Time from arrival to the first streamed token.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.itl = Histogram(
            "xinference:inter_token_latency_seconds",
            "Mean time between generated tokens of a stream (after the first), one observation per stream.",
            labels,
            buckets=_TOKEN_GAP_BUCKETS,
            registry=reg,
        )
        self.e2e = Histogram(
            "xinference:e2e_request_latency_seconds",
            "Time from arrival to the last byte of successful requests.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.queue_time = Histogram(
            "xinference:request_queue_time_seconds",
            "Time admitted requests waited for a free slot.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )

    # -- MetricsSink (called by api/gateway/admission.py) -------------------------------------------------------------
    def finished(self, ticket: Ticket) -> None:
        """Record a request whose ticket was left: a handful of counter and histogram updates."""
        model, engine = ticket.model, ticket.engine
        self.requests.labels(model, engine, ticket.route, ticket.outcome).inc()
        self.queue_time.labels(model, engine).observe(ticket.queued)
        if ticket.error:
            self.errors.labels(model, engine, ticket.route, ticket.error).inc()
        if ticket.prompt_tokens:
            self.prompt_tokens.labels(model, engine).inc(ticket.prompt_tokens)
        if ticket.generation_tokens:
            self.generation_tokens.labels(model, engine).inc(ticket.generation_tokens)
        if ticket.outcome != "success":
            return
        now = time.monotonic()
        self.e2e.labels(model, engine).observe(now - ticket.started)
        if ticket.streamed and ticket.first_token is not None:
            self.ttft.labels(model, engine).observe(ticket.first_token - ticket.started)
            if ticket.generation_tokens > 1:
                self.itl.labels(model, engine).observe((now - ticket.first_token) / (ticket.generation_tokens - 1))

    def rejected(self, model: str, engine: str, route: str, reason: str) -> None:
        self.requests.labels(model, engine, route, "rejected").inc()
        self.rejected_requests.labels(model, engine, route, reason).inc()

    # -- scrape ------------------------------------------------------------------------------------------------
    async def render(self, app: FastAPI) -> bytes:
        """The whole page: the per-request series, then what the supervisor, workers and engines say now."""
        snapshot = await _Snapshot.gather(app)
        page = generate_latest(self.registry)
        extra = CollectorRegistry(auto_describe=False)
        extra.register(snapshot)
        return page + generate_latest(extra)


def _flatten(stats: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Numeric leaves of an engine's stats, named ``a_b`` for nested ``{"a": {"b": 1}}``."""
    for key, value in stats.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            yield name, float(value)
        elif isinstance(value, (int, float)) and math.isfinite(value):
            yield name, float(value)
        elif isinstance(value, dict):
            yield from _flatten(value, f"{name}_")


def _metric_name(raw: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in raw.lower()).strip("_")
    return f"xinference:engine_{cleaned or 'value'}"


class _Snapshot:
    """A one-scrape collector of the values read at scrape time."""

    def __init__(self) -> None:
        self.models: list[dict[str, Any]] = []
        self.workers: list[dict[str, Any]] = []
        self.usage: dict[str, dict[str, Any]] = {}
        self.engine_stats: list[tuple[str, str, str, dict[str, Any]]] = []
        self.gates: list[Any] = []
        self.loads: dict[str, int] = {}

    @classmethod
    async def gather(cls, app: FastAPI) -> _Snapshot:
        snap = cls()
        supervisor: SupervisorRef = app.state.supervisor
        routes = app.state.generation._routes if hasattr(app.state, "generation") else None
        with contextlib.suppress(Exception):
            snap.models = await asyncio.wait_for(supervisor.list_models(), _SCRAPE_TIMEOUT)
        with contextlib.suppress(Exception):
            snap.workers = await asyncio.wait_for(supervisor.list_workers(), _SCRAPE_TIMEOUT)
        with contextlib.suppress(Exception):
            snap.usage = await asyncio.wait_for(supervisor.worker_usage(), _SCRAPE_TIMEOUT)
        if routes is not None:
            snap.gates = list(routes.admission.gates.values())
            if routes.keepalive is not None:
                snap.loads = dict(routes.keepalive.loads_started)
            await snap._engine_stats(routes)
        return snap

    async def _engine_stats(self, routes: Any) -> None:
        async def one(model: str, engine: str, index: int, ref: ReplicaRef) -> None:
            with contextlib.suppress(Exception):
                stats = await asyncio.wait_for(ref.engine_stats(), _SCRAPE_TIMEOUT)
                if isinstance(stats, dict):
                    self.engine_stats.append((model, engine, str(index), stats))

        await asyncio.gather(
            *(one(r.model_uid, r.engine, i, rep.ref) for r in routes.all() for i, rep in enumerate(r.replicas))
        )

    def collect(self) -> Iterable[Metric]:
        yield from self._model_families()
        yield from self._gate_families()
        yield from self._worker_families()
        yield from self._engine_families()

    def _model_families(self) -> Iterator[Metric]:
        labels = ["model_name", "engine"]
        status = GaugeMetricFamily(
            "xinference:model_status", "1 for the model's current status.", labels=[*labels, "status"]
        )
        replicas = GaugeMetricFamily("xinference:model_replicas", "Replicas serving now.", labels=labels)
        wanted = GaugeMetricFamily(
            "xinference:model_replicas_wanted", "Replicas the model was launched with.", labels=labels
        )
        load = GaugeMetricFamily(
            "xinference:model_load_duration_seconds", "Seconds the last (re)load of every replica took.", labels=labels
        )
        loads = CounterMetricFamily(
            "xinference:model_loads_on_demand",
            "Reloads of a model unloaded by keep-alive, started by a request.",
            labels=labels,
        )
        for model in self.models:
            key = [str(model.get("model_uid")), str(model.get("model_engine"))]
            for name in MODEL_STATUSES:
                status.add_metric([*key, name], 1.0 if model.get("status") == name else 0.0)
            replicas.add_metric(key, float(len(model.get("replicas") or [])))
            wanted.add_metric(key, float(model.get("replica") or 0))
            if model.get("load_seconds") is not None:
                load.add_metric(key, float(model["load_seconds"]))
            loads.add_metric(key, float(self.loads.get(key[0], 0)))
        yield from (status, replicas, wanted, load, loads)

    def _gate_families(self) -> Iterator[Metric]:
        labels = ["model_name", "engine"]
        running = GaugeMetricFamily("xinference:num_requests_running", "Requests holding a slot now.", labels=labels)
        waiting = GaugeMetricFamily(
            "xinference:num_requests_waiting", "Requests waiting for a slot now.", labels=labels
        )
        slots = GaugeMetricFamily(
            "xinference:max_running_requests", "Slots of every replica (admission's capacity).", labels=labels
        )
        queued = GaugeMetricFamily(
            "xinference:max_queued_requests", "Requests that may wait before a 429.", labels=labels
        )
        for gate in self.gates:
            key = [gate.model, gate.engine]
            running.add_metric(key, float(gate.running))
            waiting.add_metric(key, float(gate.waiting))
            slots.add_metric(key, float(gate.capacity))
            queued.add_metric(key, float(gate.max_queued))
        yield from (running, waiting, slots, queued)

    def _worker_families(self) -> Iterator[Metric]:
        w = ["worker"]
        cpus = GaugeMetricFamily("xinference:worker_cpu_count", "CPU cores the worker may use.", labels=w)
        cpu = GaugeMetricFamily(
            "xinference:worker_cpu_utilization", "Machine CPU use, 0-1, since the last scrape.", labels=w
        )
        mem_total = GaugeMetricFamily("xinference:worker_memory_total_bytes", "Worker RAM.", labels=w)
        mem_free = GaugeMetricFamily("xinference:worker_memory_available_bytes", "Worker RAM available.", labels=w)
        beat = GaugeMetricFamily(
            "xinference:worker_heartbeat_age_seconds", "Seconds since the last heartbeat.", labels=w
        )
        g = ["worker", "gpu", "gpu_name"]
        gpu_total = GaugeMetricFamily("xinference:worker_gpu_memory_total_bytes", "GPU memory.", labels=g)
        gpu_used = GaugeMetricFamily("xinference:worker_gpu_memory_used_bytes", "GPU memory in use.", labels=g)
        gpu_util = GaugeMetricFamily("xinference:worker_gpu_utilization", "GPU busy fraction, 0-1.", labels=g)
        r = ["worker", "model_name", "replica"]
        proc_cpu = CounterMetricFamily(
            "xinference:replica_cpu_seconds", "CPU time of a replica's process (engine children included).", labels=r
        )
        proc_rss = GaugeMetricFamily(
            "xinference:replica_memory_rss_bytes",
            "Resident memory of a replica's process (engine children included).",
            labels=r,
        )
        for worker in self.workers:
            address = str(worker.get("address"))
            hw = worker.get("hardware") or {}
            cpus.add_metric([address], float(hw.get("cpu_count") or 0))
            mem_total.add_metric([address], float(hw.get("ram_total_bytes") or 0))
            mem_free.add_metric([address], float(hw.get("ram_free_bytes") or 0))
            beat.add_metric([address], float(worker.get("seconds_since_heartbeat") or 0))
            for gpu in hw.get("gpus") or ():
                key = [address, str(gpu.get("index")), str(gpu.get("name"))]
                total = float(gpu.get("memory_total_bytes") or 0)
                gpu_total.add_metric(key, total)
                gpu_used.add_metric(key, total - float(gpu.get("memory_free_bytes") or 0))
            usage = self.usage.get(address) or {}
            if usage.get("cpu_utilization") is not None:
                cpu.add_metric([address], float(usage["cpu_utilization"]))
            for gpu in usage.get("gpus") or ():
                gpu_util.add_metric([address, str(gpu["index"]), str(gpu.get("name"))], float(gpu["utilization"]))
            for replica_uid, proc in (usage.get("replicas") or {}).items():
                key = [address, str(proc.get("model_uid")), replica_uid]
                proc_cpu.add_metric(key, float(proc.get("cpu_seconds") or 0))
                proc_rss.add_metric(key, float(proc.get("rss_bytes") or 0))
        yield from (cpus, cpu, mem_total, mem_free, beat, gpu_total, gpu_used, gpu_util, proc_cpu, proc_rss)

    def _engine_families(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for model, engine, replica, stats in self.engine_stats:
            for key, value in _flatten(stats):
                name = _metric_name(key)
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(
                        name,
                        f"The engine's own counter {key!r} (Engine.stats()).",
                        labels=["model_name", "engine", "replica"],
                    )
                family.add_metric([model, engine, replica], value)
        yield from families.values()


class RouteLabelMiddleware:
    """Pure ASGI: remembers the request's path for the ``route`` label of the requests it admits."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = current_route.set(scope.get("path", ""))
        try:
            await self.app(scope, receive, send)
        finally:
            current_route.reset(token)


def attach_router(app: FastAPI) -> None:
    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        page = await request.app.state.metrics.render(request.app)
        return Response(page, media_type=CONTENT_TYPE_LATEST)
