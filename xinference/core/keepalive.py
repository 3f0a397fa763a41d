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
import math
import re
import time
from typing import TYPE_CHECKING, Any

from xinference import settings
from xinference.errors import InvalidRequest, ModelLoadTimeout, XinferenceError

if TYPE_CHECKING:
    from xinference.api.route_cache import Route, RouteTable
    from xinference.core.admission import Admission

__all__ = ["FOREVER", "KeepAlive", "describe_keep_alive", "parse_keep_alive"]

logger = logging.getLogger(__name__)

#: What :func:`parse_keep_alive` returns for "never unload".
FOREVER: float | None = None
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_keep_alive(value: Any, param: str = "keep_alive") -> float | None:
    """Seconds a model stays loaded after its last request; None (``FOREVER``) for a negative value.

    Raises InvalidRequest naming ``param`` for anything else than a number or a duration like ``"10m"``.
    """
    if isinstance(value, bool) or value is None:
        raise InvalidRequest(f"{param} must be a duration like '10m', a number of seconds, or -1 (forever)",
                             param=param)
    if isinstance(value, (int, float)):
        if value < 0:
            return FOREVER
        return _bounded(value, value, param)
    text = str(value).strip().lower()
    negative = text.startswith("-")
    body = text[1:] if negative else text
    try:
        seconds = float(body)
    except ValueError:
        pieces = _DURATION.findall(body)
        if not body or "".join(n + u for n, u in pieces) != body:
            raise InvalidRequest(
                f"{param} {str(value)[:40]!r} is not a duration: use e.g. '30s', '10m', '1h30m', a number of "
                "seconds, 0 (unload after the current requests) or -1 (forever)", param=param) from None
        seconds = sum(float(n) * _UNITS[u] for n, u in pieces)
    return FOREVER if negative else _bounded(seconds, value, param)


#: The longest finite keep-alive (about 10 years): a longer one is a typo, and -1 says "forever".
MAX_KEEP_ALIVE_SECONDS = 10 * 365 * 86400.0


def _bounded(seconds: float, given: Any, param: str) -> float:
    """``seconds`` as a float, or InvalidRequest for nan, infinity or more than ten years (a float too large for
    the clock would fail later, far from the request that set it)."""
    try:
        number = float(seconds)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number > MAX_KEEP_ALIVE_SECONDS:
        raise InvalidRequest(f"{param} {str(given)[:40]!r} is out of range: at most ten years, or -1 (forever)",
                             param=param)
    return number


def describe_keep_alive(seconds: float | None) -> str:
    """How ``GET /v1/models`` shows a keep-alive: ``"forever"``, ``"0s"``, ``"10m"``, ``"90s"``."""
    if seconds is None:
        return "forever"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


class KeepAlive:
    """Unloads idle models and reloads them on demand; one per API process (started by its lifespan)."""

    def __init__(self, supervisor: Any, routes: RouteTable, admission: Admission) -> None:
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
            raise ModelLoadTimeout(f"model {uid!r} was unloaded while idle and is loading again; it was not ready "
                                   f"within {timeout:g}s (XINFERENCE_LOAD_TIMEOUT)", retry_after=10.0) from None
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
