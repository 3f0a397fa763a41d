"""Keep-alive: an idle model unloads, and loads again when a request names it (Ollama's ``keep_alive``).

A model's keep-alive comes from its launch (``keep_alive``), else from ``XINFERENCE_KEEP_ALIVE``, else forever; a
request's own ``keep_alive`` field replaces it from then on (unless ``XINFERENCE_KEEP_ALIVE_OVERRIDE=0``), as in
Ollama. Values: a duration (``"10m"``, ``"1h30m"``, ``"45s"``, ``"500ms"``), a number of seconds, a negative
number (``-1``: forever) or ``0`` (unload as soon as the current requests are answered).

:class:`KeepAlive` runs in the API process, beside the route table and the admission gates, because that is where
a model's last request is known without any message per request. When a model has had nothing running or waiting
for its keep-alive, it asks the supervisor to unload it: the replicas' processes end (their memory is freed) and
the model stays listed as ``unloaded`` with its launch plan. A request for an unloaded model holds its admission
ticket (so the model is not unloaded again under it), starts one load (concurrent requests share it) and waits
for it, at most ``XINFERENCE_LOAD_TIMEOUT`` seconds; then a 503 with ``Retry-After`` while the load goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from xinference import settings
from xinference.core.launch import FOREVER, describe_keep_alive, parse_keep_alive
from xinference.errors import ModelLoadTimeout, XinferenceError

if TYPE_CHECKING:
    from xinference.api.gateway.admission import Admission
    from xinference.api.gateway.routes import Route, RouteTable
    from xinference.core.refs import SupervisorRef

__all__ = ["FOREVER", "KeepAlive", "describe_keep_alive", "parse_keep_alive"]  # the parsing lives in core.launch

logger = logging.getLogger(__name__)


class KeepAlive:
    """Unloads idle models and reloads them on demand; one per API process (started by its lifespan)."""

    def __init__(self, supervisor: SupervisorRef, routes: RouteTable, admission: Admission) -> None:
        self._supervisor = supervisor
        self._routes = routes
        self._admission = admission
        #: a request's ``keep_alive`` that replaced the launch's (uid → seconds, None = forever)
        self._override: dict[str, float | None] = {}
        self._loads: dict[str, asyncio.Task[None]] = {}
        self._unloads: dict[str, asyncio.Task[None]] = {}
        #: when :meth:`check` first saw each model serving since it last did not: its idle time counts from then at
        #: the earliest, so a model that took longer than its keep-alive to load is not unloaded as soon as it is up
        self._serving_since: dict[str, float] = {}
        #: how many loads each model went through (tests and metrics read it)
        self.loads_started: dict[str, int] = {}

    def keep_alive_of(self, route: Route) -> float | None:
        if route.model_uid in self._override:
            return self._override[route.model_uid]
        raw = route.limits.get("keep_alive")
        return FOREVER if raw is None else float(raw)

    def note_request(self, uid: str, value: Any) -> None:
        """A request carried ``keep_alive``: it holds for this model from now on (unless overrides are off)."""
        if value is None or not settings.keep_alive_overrides():
            return
        self._override[uid] = parse_keep_alive(value)

    # -- load on demand ----------------------------------------------------------------------------------------
    def needs_load(self, route: Route) -> bool:
        uid = route.model_uid
        return route.status in ("unloaded", "unloading") or uid in self._unloads or uid in self._loads

    async def ensure_loaded(self, route: Route) -> Route:
        """``route`` itself when it serves; otherwise load the model (once for every caller) and wait for it, at
        most ``XINFERENCE_LOAD_TIMEOUT`` seconds (ModelLoadTimeout, a 503 with Retry-After, after that)."""
        if not self.needs_load(route):
            return route
        uid = route.model_uid
        task = self._loads.get(uid)
        if task is None:
            task = self._loads[uid] = asyncio.create_task(self._load(uid))
            self.loads_started[uid] = self.loads_started.get(uid, 0) + 1
        timeout = settings.load_timeout()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            raise ModelLoadTimeout(
                f"model {uid!r} was unloaded while idle and is loading again; it was not ready "
                f"within {timeout:g}s (XINFERENCE_LOAD_TIMEOUT)",
                retry_after=10.0,
            ) from None
        return await self._routes.get(uid)

    async def _load(self, uid: str) -> None:
        try:
            unloading = self._unloads.get(uid)
            if unloading is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(unloading)
            logger.info("model %s was unloaded; loading it for a request", uid)
            await self._supervisor.load_model(uid)
            await self._routes.refresh()
        finally:
            self._loads.pop(uid, None)

    # -- idle unload -------------------------------------------------------------------------------------------
    async def watch(self, interval: float = 0.5) -> None:
        """Check every ``interval`` seconds for models idle longer than their keep-alive (the API's lifetime)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.check()
            except Exception:  # noqa: BLE001 - never let the watcher die
                logger.exception("keep-alive check failed")

    def check(self, now: float | None = None) -> list[str]:
        """Start unloading every model idle past its keep-alive; returns their uids."""
        now = time.monotonic() if now is None else now
        started = []
        serving = {r.model_uid for r in self._routes.all() if r.status in ("ready", "degraded")}
        self._serving_since = {uid: self._serving_since.get(uid, now) for uid in serving}
        for route in self._routes.all():
            uid = route.model_uid
            if uid not in serving or uid in self._loads or uid in self._unloads:
                continue
            keep = self.keep_alive_of(route)
            if keep is None:  # FOREVER
                continue
            gate = self._admission.gate(uid, route.engine, route.limits, len(route.replicas))
            if gate.busy or gate.idle_since is None:
                continue
            if now - max(gate.idle_since, self._serving_since[uid]) < keep:
                continue
            self._unloads[uid] = asyncio.create_task(self._unload(uid, now - gate.idle_since))
            started.append(uid)
        return started

    async def _unload(self, uid: str, idle: float) -> None:
        try:
            await self._supervisor.unload_model(uid, f"idle for {idle:.1f}s (keep_alive)")
        except XinferenceError as exc:
            logger.info("model %s was not unloaded: %s", uid, exc.message)
        finally:
            with contextlib.suppress(Exception):
                await self._routes.refresh()
            self._unloads.pop(uid, None)
