"""SupervisorActor: one per cluster; knows the workers, the catalog and every launched model.

It decides (which engine, which spec, which workers and GPUs), asks workers to start the replicas, and keeps the
model table the API's route cache is built from. It is never on the per-request path: the API calls model actors
directly and only asks the supervisor for routes when its table's ``version`` changed.

This class is only the xoscar front: it builds the parts beside it, gives each its collaborators, and every public
method delegates to one part. The shared state is passed, never inherited: the model table (``models.py``, with
the change counter), the worker table, the ledger (``core/ledger.py``), the lock launches are decided under, the
background tasks, the tombstones and this process's incarnation. The parts are plain classes, each tested without
an actor: ``launcher.py`` and ``scaling.py`` (launch, start, stop, terminate, more or fewer replicas),
``membership.py`` (workers and the replicas they report), ``lifecycle.py`` (unload, load), ``autostart.py``
(launch history, autostart), ``catalog.py``, ``cache.py``, ``envs.py``, ``inspect.py`` and ``usage.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.background import BackgroundTasks
from xinference.core.ledger import Ledger
from xinference.core.refs import SUPERVISOR_UID
from xinference.core.supervisor.autostart import Autostart, History, LaunchHistory
from xinference.core.supervisor.booking import Booker
from xinference.core.supervisor.cache import Caches
from xinference.core.supervisor.catalog import Catalog
from xinference.core.supervisor.envs import EngineEnvs
from xinference.core.supervisor.inspect import Inspector
from xinference.core.supervisor.launcher import Launcher
from xinference.core.supervisor.lifecycle import Lifecycle
from xinference.core.supervisor.membership import Membership
from xinference.core.supervisor.models import ModelTable
from xinference.core.supervisor.records import Workers
from xinference.core.supervisor.scaling import Scaler
from xinference.core.supervisor.tombstones import Tombstones
from xinference.core.supervisor.usage import Usage
from xinference.model.custom import RegistrationStore
from xinference.model.registry import ModelRegistry

__all__ = ["SupervisorActor"]

logger = logging.getLogger(__name__)


class SupervisorActor(xo.StatelessActor):
    """The cluster's control plane. Created once, in the supervisor's (or ``xinference-local``'s) main pool."""

    def __init__(self, autostart_grace: float | None = None) -> None:
        """``autostart_grace``: seconds after start before autostart launches anything, so that workers that ran
        the models before a supervisor restart re-register them first (default: two heartbeats and a second;
        ``xinference-local`` passes 0, its worker starts with the supervisor and runs nothing yet)."""
        super().__init__()
        home = settings.home_dir()
        registry = ModelRegistry(store=RegistrationStore(home / "registrations"))
        workers: Workers = {}
        self._models = models = ModelTable()
        lock = asyncio.Lock()
        self._background = background = BackgroundTasks(logger)
        #: every replica's hold on GPUs and memory, booked before it starts (``core/ledger.py``)
        ledger = Ledger()
        booker = Booker(workers, ledger)
        #: this supervisor process's identity: a replica a worker reports from this incarnation whose launch is not
        #: running any more was terminated or failed here, and is killed
        incarnation = uuid.uuid4().hex
        tombstones = Tombstones(home / "supervisor" / "tombstones.json")
        self._history = history = History(LaunchHistory(home / "launch_history.json"), models)
        self._launcher = launcher = Launcher(
            registry, models, workers, ledger, booker, lock, background, tombstones, history, incarnation
        )
        self._scaler = Scaler(models, booker, ledger, lock, launcher)
        self._lifecycle = Lifecycle(models, booker, lock, launcher)
        grace = (2 * settings.heartbeat_interval() + 1.0) if autostart_grace is None else autostart_grace
        autostart = Autostart(history, models, background, launcher.launch, time.monotonic(), grace)
        self._membership = Membership(workers, models, ledger, tombstones, incarnation, autostart.schedule)
        self._catalog = Catalog(registry, workers)
        self._caches = Caches(workers)
        self._envs = EngineEnvs(workers)
        self._inspector = Inspector(models, workers, ledger)
        self._usage = Usage(workers)

    @classmethod
    def default_uid(cls) -> str:
        return SUPERVISOR_UID

    async def __post_create__(self) -> None:
        self._background.spawn(self._membership.watch(), "watch-workers")

    async def __pre_destroy__(self) -> None:
        self._background.cancel_all()

    # -- reading the cluster and the model table ---------------------------------------------------------------
    async def cluster_info(self) -> dict[str, Any]:
        return await self._inspector.cluster_info()

    async def model_events(self, model_uid: str) -> list[dict[str, Any]]:
        return self._models.events(model_uid)

    async def list_models(self) -> list[dict[str, Any]]:
        return self._models.infos()

    async def describe_model(self, model_uid: str) -> dict[str, Any]:
        return self._models.get(model_uid).info()

    async def get_routes(self) -> tuple[int, dict[str, dict[str, Any]]]:
        """(version, uid → route) for the API's cache; a model still launching is listed without replicas."""
        return self._models.routes()

    async def route_version(self) -> int:
        return self._models.version

    # -- launching, scaling, terminating (launcher.py, scaling.py) -----------------------------------------------
    async def launch_model(self, request: dict[str, Any], wait_ready: bool = True) -> dict[str, Any]:
        """Decide, place and start a model; returns its info once every replica serves (``wait_ready=False``: once
        the decisions are made, the replicas starting in the background)."""
        return await self._launcher.launch(request, wait_ready)

    async def add_replicas(
        self, model_uid: str, count: int = 1, n_gpu: int | str | None = "auto", worker_ip: str | None = None
    ) -> dict[str, Any]:
        return await self._scaler.add(model_uid, count, n_gpu, worker_ip)

    async def remove_replica(self, model_uid: str, replica_id: int) -> int:
        return await self._scaler.remove(model_uid, replica_id)

    async def launch_progress(self, model_uid: str) -> float:
        return await self._launcher.progress(model_uid)

    async def cancel_launch(self, model_uid: str) -> None:
        await self._launcher.cancel(model_uid)

    async def terminate_model(self, model_uid: str) -> None:
        await self._launcher.terminate(model_uid)

    async def shutdown(self) -> None:
        """Terminate every model (orderly shutdown of the whole cluster); their autostart stays on."""
        await self._launcher.shutdown()

    # -- unload and load (lifecycle.py), launch history (autostart.py) ---------------------------------------------
    async def unload_model(self, model_uid: str, why: str = "asked to") -> dict[str, Any]:
        return await self._lifecycle.unload(model_uid, why)

    async def load_model(self, model_uid: str) -> dict[str, Any]:
        return await self._lifecycle.load(model_uid)

    async def launch_history(self) -> list[dict[str, Any]]:
        return await self._history.listing()

    # -- membership (membership.py) ----------------------------------------------------------------------------
    async def add_worker(
        self, address: str, hardware: dict[str, Any], replicas: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return await self._membership.add_worker(address, hardware, replicas)

    async def heartbeat(self, address: str, hardware: dict[str, Any]) -> bool:
        return await self._membership.heartbeat(address, hardware)

    async def remove_worker(self, address: str) -> None:
        await self._membership.remove_worker(address)

    async def list_workers(self) -> list[dict[str, Any]]:
        return await self._membership.list_workers()

    async def replica_failed(self, model_uid: str, replica_uid: str, message: str, final: bool = False) -> None:
        await self._membership.replica_failed(model_uid, replica_uid, message, final)

    async def replica_restarted(self, worker_address: str, reported: dict[str, Any]) -> dict[str, Any]:
        return await self._membership.replica_restarted(worker_address, reported)

    # -- the catalog (catalog.py) ------------------------------------------------------------------------------
    async def register_model(self, model_type: str, family: dict[str, Any], persist: bool) -> None:
        await self._catalog.register(model_type, family, persist)

    async def unregister_model(self, model_type: str, model_name: str) -> None:
        await self._catalog.unregister(model_type, model_name)

    async def list_registrations(self, model_type: str, detailed: bool) -> list[dict[str, Any]]:
        return await self._catalog.registrations(model_type, detailed)

    async def get_registration(self, model_type: str, model_name: str) -> dict[str, Any]:
        return await self._catalog.registration(model_type, model_name)

    async def query_engines(self, model_type: str | None, model_name: str) -> dict[str, Any]:
        return await self._catalog.engines(model_type, model_name)

    # -- the workers' caches, engine environments and usage (cache.py, envs.py, usage.py) --------------------------
    async def list_cache(self, model_name: str | None = None) -> list[dict[str, Any]]:
        return await self._caches.entries(model_name)

    async def remove_cache(
        self, entry_id: str | None = None, model_name: str | None = None, worker: str | None = None
    ) -> list[dict[str, Any]]:
        return await self._caches.remove(entry_id, model_name, worker)

    async def install_engine(self, engine: str, worker: str | None = None, force: bool = False) -> list[dict[str, Any]]:
        return await self._envs.install(engine, worker, force)

    async def engine_env_status(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        return await self._envs.status(engine, worker)

    async def uninstall_engine(self, engine: str, worker: str | None = None) -> list[dict[str, Any]]:
        return await self._envs.uninstall(engine, worker)

    async def worker_usage(self) -> dict[str, dict[str, Any]]:
        return await self._usage.of_workers()

    # -- inspection (inspect.py) -------------------------------------------------------------------------------
    async def model_log(
        self, model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
    ) -> dict[str, Any]:
        return await self._inspector.model_log(model_uid, replica, tail, since)

    async def launch_status(self, model_uid: str) -> dict[str, Any]:
        return await self._inspector.launch_status(model_uid)

    def devices(self) -> list[dict[str, Any]]:
        return self._inspector.devices()
