"""WorkerActor: one per node; starts each model replica in its own subprocess and reports the node's hardware.

A replica's subprocess is an xoscar sub pool of the worker's main pool. Its stdout/stderr go to
``XINFERENCE_HOME/logs/models/<replica>.log``, so when a load fails or the process dies, the error carries the
exit code and the last lines the engine printed (local paths shortened to file names).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xoscar as xo

from xinference import settings
from xinference.core.hardware import detect_hardware
from xinference.core.model_actor import LOG_ENV, ModelActor
from xinference.errors import LaunchFailed, ModelNotFound, XinferenceError

__all__ = ["WorkerActor", "log_tail", "scrub_paths"]

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 15
_ABS_PATH = re.compile(r"(?<![\w.])(/[^\s:'\"()\[\],]+)+")


def scrub_paths(text: str) -> str:
    """Replace absolute local paths by their last component: error texts leave the machine, paths should not."""
    return _ABS_PATH.sub(lambda m: ".../" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of a model log, paths scrubbed; empty when there is no log."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            tail = deque((line.rstrip() for line in handle if line.strip()), maxlen=lines)
    except OSError:
        return ""
    return scrub_paths("\n".join(tail))


@dataclass
class _Replica:
    replica_uid: str
    address: str
    log_path: Path


class WorkerActor(xo.StatelessActor):
    """Runs model replicas on this node. Created by the bootstrap with the node's main pool."""

    def __init__(self, main_pool: Any, supervisor_address: str | None = None) -> None:
        super().__init__()
        self._pool = main_pool
        self._supervisor_address = supervisor_address
        self._replicas: dict[str, _Replica] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def default_uid(cls) -> str:
        return "worker"

    async def __post_create__(self) -> None:
        if self._supervisor_address:
            from xinference.core.supervisor import SupervisorActor

            supervisor = await xo.actor_ref(address=self._supervisor_address, uid=SupervisorActor.default_uid())
            await supervisor.add_worker(self.address, await self.hardware())

    async def hardware(self) -> dict[str, Any]:
        """Fresh hardware facts (free memory changes as models come and go)."""
        info = await asyncio.to_thread(detect_hardware)
        return info.model_dump(mode="json")

    async def launch_replica(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Start a subprocess, create the ModelActor there and load the model; returns its address and facts."""
        replica_uid = plan["replica_uid"]
        async with self._lock:
            if replica_uid in self._replicas:
                raise LaunchFailed(f"replica {replica_uid!r} is already running on this worker")
            log_path = settings.model_logs_dir() / f"{replica_uid}.log"
            log_path.write_text("")
            address = await self._pool.append_sub_pool(label=f"model:{replica_uid}", env={LOG_ENV: str(log_path)})
            self._replicas[replica_uid] = _Replica(replica_uid, address, log_path)
        plan = {**plan, "hardware": plan.get("hardware") or await self.hardware()}
        try:
            ref = await xo.create_actor(ModelActor, plan, address=address, uid=ModelActor.default_uid())
            facts = await ref.load()
        except LaunchFailed as exc:
            await self._discard(replica_uid)
            raise LaunchFailed(self._with_log(exc.message, log_path), param=exc.param) from None
        except XinferenceError:
            await self._discard(replica_uid)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            await self._discard(replica_uid)
            raise
        except BaseException as exc:  # noqa: BLE001 - the subprocess died or the actor call broke
            code = self._exit_code(address)
            await self._discard(replica_uid)
            status = f"exited with code {code}" if code is not None else f"failed ({type(exc).__name__})"
            raise LaunchFailed(self._with_log(f"the model process {status} while loading", log_path)) from None
        logger.info("replica %s serving at %s", replica_uid, address)
        return {"address": address, **facts}

    async def terminate_replica(self, replica_uid: str) -> None:
        if replica_uid not in self._replicas:
            raise ModelNotFound(f"replica {replica_uid!r} is not running on this worker")
        await self._discard(replica_uid)

    async def list_replicas(self) -> list[str]:
        return list(self._replicas)

    async def shutdown(self) -> None:
        """Stop every replica (used on orderly shutdown)."""
        await asyncio.gather(*(self._discard(uid) for uid in list(self._replicas)), return_exceptions=True)

    async def _discard(self, replica_uid: str) -> None:
        replica = self._replicas.pop(replica_uid, None)
        if replica is None:
            return
        try:
            await asyncio.wait_for(xo.destroy_actor(await self._model_ref(replica.address)), timeout=10)
        except BaseException:  # noqa: BLE001 - the process may already be gone; removal below is what matters
            logger.debug("model actor of %s did not shut down cleanly", replica_uid, exc_info=True)
        try:
            await self._pool.remove_sub_pool(replica.address, timeout=5, force=True)
        except BaseException:  # noqa: BLE001
            logger.warning("could not remove the subprocess of %s", replica_uid, exc_info=True)

    @staticmethod
    async def _model_ref(address: str) -> Any:
        return await xo.actor_ref(address=address, uid=ModelActor.default_uid())

    def _exit_code(self, address: str) -> int | None:
        process = getattr(self._pool, "sub_processes", {}).get(address)
        code = getattr(process, "returncode", None)
        return code if isinstance(code, int) else None

    @staticmethod
    def _with_log(message: str, log_path: Path) -> str:
        tail = log_tail(log_path)
        return f"{message}\nlast log lines of the model process:\n{tail}" if tail else message
