"""WorkerActor: one per node; starts each model replica in its own subprocess and reports the node's hardware.

The actor holds the replicas and talks to the supervisor and the model processes; what it knows about one replica
and how its process is set up are in ``replica.py``, when a replica is checked and restarted in ``health.py``, the
saved replicas a restarted worker relaunches in ``state.py``.

A replica's subprocess is an xoscar sub pool of the worker's main pool. Its stdout/stderr go to
``XINFERENCE_HOME/logs/models/<replica>.log``, so when a load fails or the process dies, the error carries the
exit code and the last lines the engine printed (local paths shortened to file names).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import xoscar as xo

from xinference import settings
from xinference.core.background import BackgroundTasks, FailureStreak
from xinference.core.env_jobs import EnvJobs
from xinference.core.exit_watch import ExitWatch
from xinference.core.launch import LaunchPlan
from xinference.core.model_actor import LOG_ENV, ModelActor
from xinference.core.refs import WORKER_UID, ReplicaRef, SupervisorRef, replica_ref, supervisor_ref
from xinference.core.worker.health import HEALTH_INTERVAL_S, health_due, refill_restart_budget
from xinference.core.worker.replica import (
    _Replica,
    device_env,
    engine_class,
    engine_process,
    why_process_did_not_start,
)
from xinference.core.worker.state import SavedReplicas
from xinference.errors import EngineError, InvalidRequest, LaunchFailed, ModelNotFound, XinferenceError
from xinference.hardware import detect_hardware
from xinference.logtail import log_tail

__all__ = ["WorkerActor"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class WorkerActor(xo.StatelessActor):
    """Runs model replicas on this node. Created by the bootstrap with the node's main pool."""

    def __init__(self, main_pool: Any, supervisor_address: str | None = None, restore: bool = False) -> None:
        """``restore``: relaunch the replicas this worker ran before it stopped (``xinference-worker`` does;
        ``xinference-local`` does not, its models are launched by the user or ``--launch``)."""
        super().__init__()
        self._pool = main_pool
        self._supervisor_address = supervisor_address
        self._restore = restore
        self._stopping = False
        self._replicas: dict[str, _Replica] = {}
        self._lock = asyncio.Lock()
        self._tasks = BackgroundTasks(logger)
        self._exits = ExitWatch(main_pool)
        self._heartbeats = FailureStreak(logger, "the heartbeat to the supervisor")
        self._reports = FailureStreak(logger, "reporting to the supervisor")
        self._supervisor: SupervisorRef | None = None
        self._envs = EnvJobs()
        self._saved = SavedReplicas(settings.home_dir() / "worker" / "replicas.json")

    @classmethod
    def default_uid(cls) -> str:
        return WORKER_UID

    async def __post_create__(self) -> None:
        if self._supervisor_address:
            self._supervisor = await supervisor_ref(self._supervisor_address)
            await self._register([])
            self._tasks.spawn(self._heartbeat(), "heartbeat")
        self._tasks.spawn(self._watch_replicas(), "watch-replicas")
        if self._restore:
            self._tasks.spawn(self._relaunch_saved(), "relaunch-saved")

    def _save_state(self) -> None:
        """Remember the running replicas' plans, so a restarted worker can relaunch them. An orderly shutdown keeps
        the file as it was: what ran before the stop runs again after the restart."""
        if not self._stopping:
            self._saved.save([r.plan for r in self._replicas.values() if r.facts])

    async def _relaunch_saved(self) -> None:
        for saved in self._saved.load():
            try:
                await self.launch_replica(saved)
            except Exception as exc:  # noqa: BLE001 - one replica failing must not stop the others
                logger.warning("could not relaunch %s: %s", saved.replica_uid, exc)
        if self._supervisor is not None and self._replicas:
            try:
                await self._register([r.report() for r in self._replicas.values() if r.facts])
            except Exception as exc:  # noqa: BLE001 - the heartbeat registers again if the supervisor forgot us
                self._reports.failed(exc)

    async def _register(self, reports: list[dict[str, Any]], hardware: dict[str, Any] | None = None) -> None:
        """(Re-)register with the supervisor, reporting ``reports``; stop the replicas it says to kill (their model
        was terminated or relaunched while this worker was away, or has all its replicas elsewhere)."""
        assert self._supervisor is not None, "registering needs the supervisor's address"
        answer = await self._supervisor.add_worker(self.address, hardware or await self.hardware(), reports)
        for replica_uid, reason in ((answer or {}).get("kill") or {}).items():
            logger.warning("the supervisor does not want replica %s any more (%s): stopping it", replica_uid, reason)
            # in the background: stopping takes seconds, and the heartbeat that registered must go on beating
            self._tasks.spawn(self._discard(replica_uid, f"the supervisor stopped it: {reason}"), f"kill-{replica_uid}")

    async def __pre_destroy__(self) -> None:
        self._tasks.cancel_all()
        self._envs.shutdown()

    async def _heartbeat(self) -> None:
        """Tell the supervisor this worker lives; re-register (with the running replicas) when it forgot us."""
        supervisor = self._supervisor
        assert supervisor is not None, "heartbeats need the supervisor's address"
        while True:
            await asyncio.sleep(settings.heartbeat_interval())
            try:
                hardware = await self.hardware()
                if not await supervisor.heartbeat(self.address, hardware):
                    logger.info(
                        "the supervisor does not know this worker (restarted, or declared this worker gone): "
                        "registering again"
                    )
                    await self._register(
                        [r.report() for r in self._replicas.values() if not r.restarting and r.facts], hardware
                    )
            except Exception as exc:  # noqa: BLE001 - the supervisor may be down: keep serving, retry next beat
                self._heartbeats.failed(exc)  # a lasting outage is one WARNING, not one per beat
            else:
                self._heartbeats.succeeded()

    async def hardware(self) -> dict[str, Any]:
        """Fresh hardware facts (free memory changes as models come and go), with every engine's library verdict on
        this machine, so the supervisor matches engines against what this worker has installed."""
        from xinference.engines.libraries import library_verdicts

        def detect() -> dict[str, Any]:
            return {**detect_hardware().model_dump(mode="json"), "engines": library_verdicts()}

        return await asyncio.to_thread(detect)

    # -- engine environments -------------------------------------------------------------------------------------
    async def install_engine(self, engine: str, force: bool = False) -> dict[str, Any]:
        """Start installing ``engine``'s environment here; returns its status at once (see ``engine_env``)."""
        return {**self._envs.start(engine, force), "worker": self.address}

    async def engine_env(self, engine: str) -> dict[str, Any]:
        """Install progress and state of ``engine``'s environment on this worker."""
        return {**self._envs.status(engine), "worker": self.address}

    async def uninstall_engine(self, engine: str) -> dict[str, Any]:
        in_use = [
            r.replica_uid for r in self._replicas.values() if r.plan.model_engine.lower() == engine.strip().lower()
        ]
        if in_use:
            raise InvalidRequest(
                f"{engine} serves {', '.join(in_use)} on this worker; terminate them first", param="engine"
            )
        removed = await self._envs.remove(engine)
        return {**self._envs.status(engine), "removed": removed, "worker": self.address}

    async def launch_replica(self, plan: LaunchPlan | dict[str, Any]) -> dict[str, Any]:
        """Start a subprocess, create the ModelActor there and load the model; returns its address and facts.

        ``plan`` crosses as the :class:`LaunchPlan` itself; a dict (``LaunchPlan.to_dict``) is still taken from a
        supervisor of an earlier version, which sent it that way (a cluster upgraded one machine at a time)."""
        if isinstance(plan, dict):
            plan = LaunchPlan.from_dict(plan)
        replica_uid = plan.replica_uid
        model_path = plan.model_path
        if model_path and not await asyncio.to_thread(os.path.exists, model_path):
            raise InvalidRequest(
                f"model_path {model_path!r} does not exist on worker {self.address}", param="model_path"
            )
        plan = dataclasses.replace(plan, hardware=plan.hardware or await self.hardware())
        async with self._lock:
            if replica_uid in self._replicas:
                raise LaunchFailed(f"replica {replica_uid!r} is already running on this worker")
            replica = _Replica(
                replica_uid,
                "",
                settings.model_logs_dir() / f"{replica_uid}.log",
                plan,
                engine=engine_class(plan.model_engine),
            )
            self._replicas[replica_uid] = replica
        try:
            await self._spawn(replica)
        except BaseException:
            self._replicas.pop(replica_uid, None)
            raise
        logger.info("replica %s serving at %s", replica_uid, replica.address)
        self._save_state()
        return {"address": replica.address, **replica.facts}

    async def _spawn(self, replica: _Replica) -> None:
        """Create the subprocess and load the model in it; on failure, clean up and raise with the log tail."""
        replica.log_path.write_text("")
        python, engine_env = engine_process(replica.engine, replica.plan)
        env = {**device_env(replica.plan), **engine_env, LOG_ENV: str(replica.log_path)}
        try:
            address = await self._pool.append_sub_pool(
                label=f"model:{replica.replica_uid}",
                env=env,
                modules=["xinference.core.xoscar_setup"],
                start_python=python,
            )
        except OSError as exc:  # the process exited before its pool came up: say why, not xoscar's bare "failed"
            cause = await asyncio.to_thread(why_process_did_not_start, python, env)
            where = f" with {python}" if python else ""
            raise LaunchFailed(f"the model process did not start{where}: {cause or exc}") from None
        replica.address = address
        try:
            # a cancel that came while the process started (it could not reach a model actor yet) stops it here
            self._raise_if_cancelled(replica)
            ref: ReplicaRef = await xo.create_actor(
                ModelActor, replica.plan, address=address, uid=ModelActor.default_uid()
            )
            self._raise_if_cancelled(replica)
            replica.facts = await ref.load()
            replica.serving_since = asyncio.get_running_loop().time()
        except LaunchFailed as exc:
            await self._remove_process(replica)
            raise LaunchFailed(self._with_log(exc.message, replica.log_path), param=exc.param) from None
        except (XinferenceError, asyncio.CancelledError, KeyboardInterrupt):
            await self._remove_process(replica)
            raise
        except BaseException as exc:  # noqa: BLE001 - the subprocess died or the actor call broke
            code = self._exit_code(address)
            await self._remove_process(replica)
            status = f"exited with code {code}" if code is not None else f"failed ({type(exc).__name__})"
            raise LaunchFailed(self._with_log(f"the model process {status} while loading", replica.log_path)) from None

    @staticmethod
    def _raise_if_cancelled(replica: _Replica) -> None:
        if replica.cancelled:
            raise LaunchFailed(f"the launch of {replica.plan.model_uid or replica.replica_uid!r} was cancelled")

    async def _watch_replicas(self) -> None:
        """Notice replicas whose process died; report them and restart them (up to the restart limit)."""
        while True:
            await asyncio.sleep(1.0)
            for replica in list(self._replicas.values()):
                if replica.restarting or not replica.facts:
                    continue
                code = self._exit_code(replica.address, replica.facts.get("pid"))
                if code is not None:
                    replica.restarting = True
                    self._tasks.spawn(self._recover(replica, code), f"recover-{replica.replica_uid}")
                elif self._health_due(replica):
                    self._tasks.spawn(self._check_health(replica), f"health-{replica.replica_uid}")

    def _health_due(self, replica: _Replica) -> bool:
        return health_due(replica, asyncio.get_running_loop().time())

    async def _check_health(self, replica: _Replica) -> None:
        """A replica whose engine fails its health check is stopped and recovered like a dead process."""
        replica.checking = True
        try:
            ref = await self._model_ref(replica.address)
            await asyncio.wait_for(ref.check_health(), timeout=HEALTH_INTERVAL_S * 3)
        except (EngineError, asyncio.TimeoutError) as exc:
            if replica.restarting or replica.replica_uid not in self._replicas:
                return
            reason = exc.message if isinstance(exc, EngineError) else "its health check did not answer in time"
            logger.warning("replica %s is unhealthy: %s", replica.replica_uid, reason)
            replica.restarting = True
            await self._recover(replica, None, reason)
        except Exception:  # noqa: BLE001 - the process died meanwhile: the exit-code watcher handles it
            logger.debug("health check of %s failed", replica.replica_uid, exc_info=True)
        finally:
            replica.checking = False

    async def _recover(self, replica: _Replica, code: int | None, reason: str | None = None) -> None:
        what = f"the model process exited with code {code}" if reason is None else f"the engine failed: {reason}"
        message = self._with_log(what, replica.log_path)
        logger.warning("replica %s died (%s)", replica.replica_uid, what)
        model_uid = replica.plan.model_uid
        await self._tell_supervisor(
            lambda supervisor: supervisor.replica_failed(model_uid, replica.replica_uid, message)
        )
        await self._remove_process(
            replica,
            None
            if reason is None
            else f"replica {replica.replica_uid} is restarting after a failed health check: {reason}",
        )
        refill_restart_budget(replica, asyncio.get_running_loop().time())
        while replica.restarts < settings.model_restart_limit() and replica.replica_uid in self._replicas:
            replica.restarts += 1
            try:
                await self._spawn(replica)
            except Exception as exc:  # noqa: BLE001 - reported, then retried or given up
                logger.warning("restart %d of %s failed: %s", replica.restarts, replica.replica_uid, exc)
                continue
            replica.restarting = False
            logger.info("replica %s restarted at %s", replica.replica_uid, replica.address)
            answer = await self._report_restarted(replica)
            reason = answer.get("kill") if isinstance(answer, dict) else None
            if reason:  # its model was terminated (or relaunched) while it was down: nobody would ever stop it
                logger.warning("restarted replica %s is not wanted (%s): stopping it", replica.replica_uid, reason)
                await self._discard(replica.replica_uid, f"the supervisor stopped it: {reason}")
            return
        self._replicas.pop(replica.replica_uid, None)
        gave_up = f"gave up after {replica.restarts} restart(s)"
        await self._tell_supervisor(
            lambda supervisor: supervisor.replica_failed(model_uid, replica.replica_uid, gave_up, True)
        )

    async def _report_restarted(self, replica: _Replica) -> dict[str, Any] | None:
        """Tell the supervisor a dead replica serves again; its answer says whether it is still wanted."""
        report = replica.report()
        return await self._tell_supervisor(lambda supervisor: supervisor.replica_restarted(self.address, report))

    async def _tell_supervisor(self, call: Callable[[SupervisorRef], Awaitable[T]]) -> T | None:
        """``call(supervisor)``, or None when this worker has no supervisor or the call failed (counted, warned
        once per streak): a report the supervisor missed is made good when the worker registers again."""
        if self._supervisor is None:
            return None
        try:
            answer = await call(self._supervisor)
        except Exception as exc:  # noqa: BLE001 - the supervisor may be restarting; it re-adopts on re-register
            self._reports.failed(exc)
            return None
        self._reports.succeeded()
        return answer

    async def launch_progress(self, replica_uid: str) -> float:
        """Load progress (0.0-1.0) of a replica being launched here; 0.0 before its model actor exists.

        The ``replica_progress`` of :meth:`launch_status`, kept for callers that want the fraction alone."""
        return float((await self.launch_status(replica_uid))["replica_progress"])

    async def launch_status(self, replica_uid: str) -> dict[str, Any]:
        """Stage, bytes, speed and time left of a replica being launched here (``GET .../progress``), and its
        ``replica_progress`` (0.0-1.0; 0.0 before its model actor exists), all from one call to its model actor.

        The fraction is not called ``progress``: the supervisor merges this into a launch's status, whose
        ``progress`` is the whole launch's (every replica), not this replica's."""
        replica = self._replicas.get(replica_uid)
        if replica is None:
            raise ModelNotFound(f"replica {replica_uid!r} is not on this worker")
        status: dict[str, Any] = {
            "stage": "starting the model process",
            "done_bytes": 0,
            "total_bytes": 0,
            "bytes_per_second": None,
            "eta_seconds": None,
            "progress": 0.0,
        }
        if replica.address:
            try:
                status = await (await self._model_ref(replica.address)).load_status()
            except (xo.ActorNotExist, xo.ServerClosed, ConnectionError, OSError):
                pass  # its model actor is not created yet
        status["replica_progress"] = float(status.pop("progress", 0.0))
        return status

    async def cancel_launch(self, replica_uid: str) -> None:
        """Ask a loading replica to stop downloading; its ``launch_replica`` then fails as cancelled. A cancel that
        comes before the replica's process or model actor exists is remembered and stops the launch as soon as
        they do, before any download."""
        replica = self._replicas.get(replica_uid)
        if replica is None:
            return
        replica.cancelled = True
        if not replica.address:
            return
        try:
            await (await self._model_ref(replica.address)).cancel_load()
        except (xo.ActorNotExist, xo.ServerClosed, ConnectionError, OSError):
            logger.debug("replica %s had no model actor to cancel yet", replica_uid)

    async def list_cache(self, model_name: str | None = None) -> list[dict[str, Any]]:
        """The model cache entries on this node (see :mod:`xinference.model.cache`)."""
        from xinference.model.cache import list_entries

        return [{**entry, "worker": self.address} for entry in await asyncio.to_thread(list_entries, model_name)]

    async def remove_cache(self, entry_id: str) -> dict[str, Any]:
        from xinference.model.cache import remove_entry

        return {**await asyncio.to_thread(remove_entry, entry_id), "worker": self.address}

    async def terminate_replica(self, replica_uid: str, why: str = "terminated") -> None:
        """Stop a replica; ``why`` (terminated, scaled down, unloaded...) is what its open streams end with."""
        if replica_uid not in self._replicas:
            raise ModelNotFound(f"replica {replica_uid!r} is not running on this worker")
        await self._discard(replica_uid, why)

    async def usage(self) -> dict[str, Any]:
        """This machine's CPU and GPU use and each replica's process CPU and RSS (``GET /metrics``)."""
        from xinference.core.resources import machine_usage

        pids = {uid: (r.plan.model_uid, r.facts.get("pid")) for uid, r in self._replicas.items()}
        return await asyncio.to_thread(machine_usage, pids)

    async def read_log(self, replica_uid: str, tail: int, since: int | None = None) -> dict[str, Any]:
        """A bounded, path-scrubbed piece of a replica's log (``GET /v1/models/{uid}/logs``)."""
        from xinference.core.logs import read_log

        if "/" in replica_uid or replica_uid.startswith("."):
            raise InvalidRequest(f"invalid replica {replica_uid!r}", param="replica")
        path = settings.model_logs_dir() / f"{replica_uid}.log"
        return await asyncio.to_thread(read_log, path, tail, since)

    async def shutdown(self) -> None:
        """Stop every replica and leave the cluster (orderly shutdown)."""
        self._stopping = True
        self._tasks.cancel_all()
        await asyncio.gather(
            *(self._discard(uid, f"the worker of replica {uid} is shutting down") for uid in list(self._replicas)),
            return_exceptions=True,
        )
        if self._supervisor is not None and self._supervisor_address != self.address:
            try:
                await asyncio.wait_for(self._supervisor.remove_worker(self.address), timeout=5)
            except Exception:  # noqa: BLE001 - the supervisor may be gone already
                logger.debug("could not tell the supervisor this worker leaves")

    async def _discard(self, replica_uid: str, why: str = "stopped") -> None:
        replica = self._replicas.pop(replica_uid, None)
        if replica is not None:
            logger.info("stopping replica %s: %s", replica_uid, why)
            await self._remove_process(replica, why)
            self._save_state()

    async def _remove_process(self, replica: _Replica, why: str | None = None) -> None:
        """End a replica's subprocess (its engine unloads first when it still runs). ``why`` is what the requests it
        still serves end with (their clients get it as an error, never a clean end of a cut answer). A cancel that
        arrives while the engine unloads still removes the process, then stays a cancel: the caller's task ends
        cancelled."""
        replica_uid = replica.replica_uid
        if not replica.address:
            return
        cancelled: asyncio.CancelledError | None = None
        try:
            if self._exit_code(replica.address, replica.facts.get("pid")) is None:  # alive: unload first
                ref = await self._model_ref(replica.address)
                if why and replica.facts:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(ref.stop_serving(why), timeout=5)
                await asyncio.wait_for(xo.destroy_actor(ref), timeout=10)
        except asyncio.CancelledError as exc:
            cancelled = exc
        except Exception:  # noqa: BLE001 - the process may already be gone; removal below is what matters
            logger.debug("model actor of %s did not shut down cleanly", replica_uid, exc_info=True)
        try:
            await self._pool.remove_sub_pool(replica.address, timeout=5, force=True)
        except Exception:  # noqa: BLE001
            logger.warning("could not remove the subprocess of %s", replica_uid, exc_info=True)
        if cancelled is not None:
            raise cancelled

    @staticmethod
    async def _model_ref(address: str) -> ReplicaRef:
        return await replica_ref(address)

    def _exit_code(self, address: str, pid: int | None = None) -> int | None:
        return self._exits.exit_code(address, pid)

    @staticmethod
    def _with_log(message: str, log_path: Path) -> str:
        tail = log_tail(log_path)
        return f"{message}\nlast log lines of the model process:\n{tail}" if tail else message
