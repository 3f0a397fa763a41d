"""Control-plane figures per engine: install time, launch time and the first token after a launch.

For llama.cpp (the bundled GGUF), Transformers, vLLM and MLX (SmolLM2-135M as safetensors, :mod:`benchmark._weights`),
one after the other on one fresh ``xinference-local``::

    python -m benchmark.engine_launch                    # envs as they are under XINFERENCE_ENVS_DIR
    python -m benchmark.engine_launch --install          # also time ``xinference engine install --local`` (minutes)

- install: llama.cpp and Transformers run from the main environment (nothing to install); vLLM and MLX have envs
  of their own. Without ``--install`` an env already there is reported as such (not timed) and a missing one skips
  its engine. With ``--install`` each is installed fresh into a temporary ``XINFERENCE_ENVS_DIR`` (pip may still
  reuse its wheel cache: say so when quoting the figure), and the platform then launches from those envs;
- launch: wall time of ``POST /v1/models`` (the model process started, weights loaded, engine ready);
- first token: a streamed chat request sent as soon as the launch returns, to its first content chunk (cold
  caches, first compilation or graph capture included), and the model process's RSS after it.

Each model is terminated before the next engine's launch, so only one is loaded at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/engine_launch.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark import _engines, _proc

__all__ = ["ENGINES", "EngineLaunchConfig", "install_figure", "launch_plan", "run_engine_launches"]

ENGINES: tuple[str, ...] = ("llama.cpp", "Transformers", "vLLM", "MLX")
#: engines that run from an env of their own on a Linux CPU
ENV_ENGINES = frozenset({"vLLM", "MLX"})
PYTORCH_NAME = "smollm2-launch-bench"


@dataclass(frozen=True)
class EngineLaunchConfig:
    engines: tuple[str, ...] = ENGINES
    install: bool = False  # time a fresh install of each env into a temporary folder
    install_timeout: float = 900.0


def launch_plan(engine: str) -> tuple[str, dict[str, Any]]:
    """``(model_name, launch options)`` for ``engine``: the bundled GGUF for llama.cpp, the pytorch copy otherwise;
    small contexts so that every engine reserves little memory."""
    if engine == "llama.cpp":
        return _proc.DEFAULT_MODEL, {"n_ctx": 2048}
    options: dict[str, Any] = {
        "vLLM": {"max_model_len": 2048, "cpu_kvcache_space_gib": 1},
        "MLX": {"max_model_len": 2048},
    }.get(engine, {})
    return PYTORCH_NAME, options


def install_figure(engine: str, install: bool, envs: Path, timeout: float = 900.0) -> dict[str, Any]:
    """What installing ``engine`` costs here: timed into ``envs`` when ``install``, else the state of its env."""
    if engine not in ENV_ENGINES:
        return {"status": "main environment", "seconds": None}
    if not install:
        found = _engines.engine_python(engine, envs) is not None
        return {
            "status": "already installed (not timed; --install times it)" if found else "not installed",
            "seconds": None,
            "installed": found,
        }
    command = [str(Path(sys.executable).parent / "xinference"), "engine", "install", engine, "--local"]
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env={**os.environ, "XINFERENCE_ENVS_DIR": str(envs)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {
            "status": f"install failed: {(done.stderr or done.stdout)[-300:]}",
            "seconds": seconds,
            "installed": False,
        }
    return {"status": "installed fresh", "seconds": seconds, "installed": True}


def _launch_one(platform: _proc.Platform, engine: str, log: Any) -> dict[str, Any]:
    model_name, options = launch_plan(engine)
    uid = f"launch-{engine.lower().replace('.', '')}"
    before = {p.pid for p in platform.tree()}
    launch_s = _engines.launch(platform.api, uid, model_name, engine, options)
    try:
        first_s = _engines.first_token_seconds(platform.api, uid)
        rss = _proc.rss_mb(_engines.new_processes(platform, before))
    finally:
        _proc.terminate_model(platform.api, uid)  # one model loaded at a time, also after a failed request
    log(f"{engine}: launch {launch_s:.2f}s, first token {first_s:.2f}s after it, model processes {rss:.0f} MiB")
    return {"launch_seconds": launch_s, "first_token_seconds": first_s, "model_rss_mb": rss, "options": options}


def run_engine_launches(config: EngineLaunchConfig = EngineLaunchConfig(), log: Any = print) -> dict[str, Any]:
    """Install figures, then one launch and first token per engine on a fresh platform; a failing engine is
    reported with its error and the others still run."""
    with tempfile.TemporaryDirectory(prefix="xinf-engine-launch-") as tmp:
        envs = Path(tmp) / "envs" if config.install else _engines.envs_dir()
        results: dict[str, Any] = {}
        for engine in config.engines:
            log(f"{engine}: install ..." if config.install and engine in ENV_ENGINES else f"{engine}: env check")
            results[engine] = {"install": install_figure(engine, config.install, envs, config.install_timeout)}
        from benchmark._weights import converted_smollm2

        with _proc.stopping_later() as later:
            platform = later(_proc.start_platform(Path(tmp) / "home", extra_env={"XINFERENCE_ENVS_DIR": str(envs)}))
            _engines.register_family(platform.api, _engines.pytorch_family(PYTORCH_NAME, converted_smollm2()))
            for engine in config.engines:
                if results[engine]["install"].get("installed") is False:
                    results[engine]["skipped"] = "its environment is not installed"
                    continue
                try:
                    results[engine].update(_launch_one(platform, engine, log))
                except RuntimeError as exc:
                    results[engine]["error"] = str(exc)[:500]
                    log(f"{engine}: {exc}")
    return {"install_timed": config.install, "engines": results}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install, launch and first-token time per engine.")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma list, default: all four")
    parser.add_argument("--install", action="store_true", help="time a fresh env install (temporary folder)")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    _proc.exit_on_sigterm()
    engines = tuple(name.strip() for name in args.engines.split(",") if name.strip())
    report = run_engine_launches(EngineLaunchConfig(engines=engines, install=args.install))
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=2, allow_nan=False))
    return 1 if any("error" in row for row in report["engines"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
