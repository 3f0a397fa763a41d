"""Engine installs running on a worker: one background job per engine, its progress readable at any time.

The worker owns these jobs (the env is created on the machine that will run the engine); the supervisor and the API
only start them and read their progress. Installs take minutes (vLLM: ~2 min, 3.5 GB), so a request never waits
for one unless it asks to.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from xinference.engines import envs
from xinference.engines.registry import get_engine_class, resolve_engine_name
from xinference.errors import InvalidRequest, XinferenceError
from xinference.hardware import detect_hardware

__all__ = ["EnvJobs"]

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    engine: str
    task: asyncio.Task[None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: dict[str, Any] = field(default_factory=dict)
    #: every stage the install went through, in order, each with its first message: a client polling every
    #: second still shows a stage that lasted less than that (a cached resolve takes milliseconds).
    stages: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None

    def record(self, progress: dict[str, Any]) -> None:
        self.progress = progress  # one reference store: readers never see a half-built dict
        stage = str(progress.get("stage", ""))
        if not self.stages or self.stages[-1]["stage"] != stage:
            self.stages = [*self.stages, {"stage": stage, "message": str(progress.get("message", ""))}]

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class EnvJobs:
    """Starts, follows, cancels and removes engine environments on this machine."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    def recipe_for(self, engine: str) -> tuple[str, envs.EnvRecipe]:
        """The canonical engine name and what it needs on this machine; InvalidRequest when it has nothing to
        install here (it runs from the main environment, or cannot run on this hardware at all)."""
        name = resolve_engine_name(engine)
        cls = get_engine_class(name)
        hardware = detect_hardware()
        recipe = cls.env_recipe(hardware)
        if recipe is None:
            installed = cls.check_lib()
            if installed:
                raise InvalidRequest(
                    f"{name} has no environment of its own: it runs from the platform's own "
                    f"installation, where it is installed",
                    param="engine",
                )
            gpu = (
                "an NVIDIA GPU"
                if hardware.cuda_available
                else "Apple silicon"
                if hardware.is_apple_silicon
                else "no GPU"
            )
            raise InvalidRequest(
                f"{name} cannot be installed on this worker: it has no build for "
                f"{hardware.os} {hardware.arch} with {gpu}",
                param="engine",
            )
        return name, recipe

    def start(self, engine: str, force: bool = False) -> dict[str, Any]:
        """Start installing ``engine`` (a no-op while an install of it runs); returns its status at once."""
        name, recipe = self.recipe_for(engine)
        job = self._jobs.get(name)
        if job is not None and job.running:
            return self.status(name)
        job = self._jobs[name] = _Job(name)
        job.record({"engine": name, "stage": "queued", "fraction": 0.0})
        job.task = asyncio.get_running_loop().create_task(self._run(job, recipe, force))
        return self.status(name)

    async def _run(self, job: _Job, recipe: envs.EnvRecipe, force: bool) -> None:
        def on_progress(progress: envs.InstallProgress) -> None:
            job.record(progress.to_dict())

        try:
            await asyncio.to_thread(envs.install, job.engine, recipe, on_progress, job.cancel, force)
        except XinferenceError as exc:
            job.error = exc.message
            logger.warning("installing %s failed: %s", job.engine, exc.message.splitlines()[0])
        except Exception as exc:  # noqa: BLE001 - reported through the status, never lost
            job.error = f"{type(exc).__name__}: {exc}"
            logger.exception("installing %s failed", job.engine)

    def status(self, engine: str) -> dict[str, Any]:
        """Install progress of ``engine`` on this machine, and whether it is installed now."""
        name = resolve_engine_name(engine)
        job = self._jobs.get(name)
        found = envs.manifest(name)
        status: dict[str, Any] = {
            "engine": name,
            "installed": found is not None,
            "installing": bool(job and job.running),
            "error": job.error if job else None,
            "progress": dict(job.progress) if job else None,
            "stages": list(job.stages) if job else [],
            "packages": _headline_packages(found),
            "check": get_engine_class(name).check_lib().reason,
        }
        return status

    async def cancel(self, engine: str) -> bool:
        job = self._jobs.get(resolve_engine_name(engine))
        if job is None or not job.running:
            return False
        job.cancel.set()
        assert job.task is not None
        await asyncio.wait([job.task], timeout=30)
        return True

    async def remove(self, engine: str) -> bool:
        """Remove ``engine``'s env (cancelling an install in progress first); False when there was none."""
        name = resolve_engine_name(engine)
        await self.cancel(name)
        self._jobs.pop(name, None)
        return await asyncio.to_thread(envs.uninstall, name)

    def shutdown(self) -> None:
        for job in self._jobs.values():
            job.cancel.set()
            if job.task is not None:
                job.task.cancel()


def _headline_packages(found: dict[str, Any] | None) -> dict[str, str]:
    """The recipe's own packages with their installed versions (not the hundred dependencies)."""
    if not found:
        return {}
    distributions = found.get("distributions") or {}
    headline = {}
    for requirement in (found.get("recipe") or {}).get("packages", []):
        name = envs.normalize_distribution(requirement.split("[")[0].split("=")[0].split(">")[0].split("<")[0])
        if name in distributions:
            headline[name] = distributions[name]
    return headline
