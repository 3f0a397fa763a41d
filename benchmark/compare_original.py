"""The standing side-by-side with the original Xinference: raw llama.cpp, this platform and the original, one run.

The original's PyPI package is also named ``xinference``, so it lives in its own virtualenv, installed the way the
platform installs an engine environment: ``$XINFERENCE_ENVS_DIR/original-xinference`` (default
``~/.cache/xinference/envs/original-xinference``), ``pip install xinference==<version> xllamacpp`` with the
repository's ``constraints.txt`` (torch pinned to the CPU build this project tests with: pip must never pull a
CUDA torch). It is started as that venv's ``xinference-local`` on its own port with its own ``XINFERENCE_HOME``
(``XINFERENCE_AUTH_ADVANCED=0``: the original's database-backed auth is on by default and answers 401), the bundled
SmolLM2-135M GGUF is registered with it as a custom LLM (``POST /v1/model_registrations/LLM``; empty
``chat_template``, so llama.cpp uses the template inside the GGUF, as the raw server and this platform do) and
launched with ``model_engine="llama.cpp"`` and the llama.cpp options this platform resolved (``n_ctx``,
``n_parallel``, ``n_threads``).

The three sides are measured with :func:`benchmark.bench_serving.run_benchmark` in the A/B schedule of
:mod:`benchmark.compare_engine` extended to three sides (every round visits each level, each side in turn, the order
reversed every other round, fresh prompts each round), greedy with ``ignore_eos``. Printed as a table and written
to ``results/original.md`` (and ``original.json``): output tok/s per side, ours ÷ raw and original ÷ raw per round
(geometric mean and 95% interval), TTFT p50 and the server CPU per output token of each side's processes.

    python -m benchmark.compare_original [--version 4.1.0] [--rounds 3] [--concurrency 1,4] [--no-install]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmark import _proc
from benchmark._md import n, table
from benchmark.bench_serving import parse_concurrency
from benchmark.compare_engine import (
    MODEL_UID,
    CompareConfig,
    RunRecord,
    Target,
    ab_schedule,
    measure,
    pairs,
    warm_up,
)
from benchmark.intervals import Estimate, difference_estimate, format_estimate, ratio_estimate
from benchmark.stats import summarize

__all__ = [
    "DEFAULT_VERSION",
    "SIDES",
    "OriginalConfig",
    "custom_family",
    "envs_dir",
    "install_original",
    "main",
    "parse_args",
    "render_markdown",
    "run_original",
    "summarize_sides",
]

#: The newest ``xinference`` on PyPI when this was written (``pip index versions xinference``); ``--version`` moves it.
DEFAULT_VERSION = "4.1.0"
SIDES: tuple[str, str, str] = ("raw", "ours", "original")
ORIGINAL_MODEL = "bench-smollm2"
ORIGINAL_UID = "bench-original"
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class OriginalConfig:
    version: str = DEFAULT_VERSION
    rounds: int = 3
    concurrency: tuple[int, ...] = (1, 4)
    num_prompts: int = 16
    max_tokens: int = 128
    install: bool = True  # install (or update) the venv first; False: use what is there

    def compare_config(self) -> CompareConfig:
        return replace(
            CompareConfig(),
            rounds=self.rounds,
            concurrency=self.concurrency,
            num_prompts=self.num_prompts,
            max_tokens=self.max_tokens,
        )


# -- installing ----------------------------------------------------------------------------------------------------
def envs_dir() -> Path:
    """Where engine environments live: ``$XINFERENCE_ENVS_DIR`` or ``~/.cache/xinference/envs``."""
    configured = os.environ.get("XINFERENCE_ENVS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "xinference" / "envs"


def venv_path() -> Path:
    return envs_dir() / "original-xinference"


def install_commands(venv: Path, version: str, constraints: Path) -> list[list[str]]:
    """The commands that make ``venv`` hold the original at ``version``: a venv of this interpreter, then one pip
    call with the constraints (torch's pin) applied."""
    python = str(venv / "bin" / "python")
    commands = [] if Path(python).is_file() else [[sys.executable, "-m", "venv", str(venv)]]
    commands.append([python, "-m", "pip", "install", "-c", str(constraints), f"xinference=={version}", "xllamacpp"])
    return commands


def installed_version(venv: Path) -> str | None:
    """The original's version in ``venv``, read from its metadata without importing it; None when absent."""
    python = venv / "bin" / "python"
    if not python.is_file():
        return None
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('xinference'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def install_original(version: str, log: Callable[[str], None] = print) -> Path:
    """The venv with the original at ``version`` (installed when missing or another version); raises with pip's
    own last lines when the install fails."""
    venv = venv_path()
    if installed_version(venv) == version:
        return venv
    constraints = REPO / "constraints.txt"
    if "torch==" not in constraints.read_text():
        raise RuntimeError(f"{constraints} pins no torch: refusing to let pip choose one (it could be a CUDA build)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    for command in install_commands(venv, version, constraints):
        log("$ " + " ".join(command))
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"installing the original Xinference {version} failed:\n{tail}")
    found = installed_version(venv)
    if found != version:
        raise RuntimeError(f"{venv} holds xinference {found} after installing {version}")
    return venv


# -- the original server -------------------------------------------------------------------------------------------
def custom_family(gguf: Path, context_length: int) -> dict[str, Any]:
    """The original's custom-LLM JSON (version 2) for the bundled GGUF file."""
    return {
        "version": 2,
        "context_length": context_length,
        "model_name": ORIGINAL_MODEL,
        "model_lang": ["en"],
        "model_ability": ["chat", "generate"],
        "model_family": ORIGINAL_MODEL,
        "architectures": ["LlamaForCausalLM"],
        "chat_template": "",  # empty: llama.cpp applies the GGUF's own template (a name here would be looked up)
        "stop": ["<|im_end|>"],
        "stop_token_ids": [2],
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": "0_135",
                "quantization": "Q4_1",
                "model_id": None,
                "model_file_name_template": gguf.name,
                "model_uri": f"file://{gguf.parent}",
            }
        ],
    }


def start_original(venv: Path, home: Path, ready_timeout: float = 180.0) -> _proc.Platform:
    """The original's ``xinference-local`` from ``venv`` on a free port with ``home`` as its XINFERENCE_HOME."""
    home.mkdir(parents=True, exist_ok=True)
    port = _proc.free_port()
    log_path = home / "server.out"
    env = {**os.environ, "XINFERENCE_HOME": str(home), "XINFERENCE_AUTH_ADVANCED": "0"}
    env.pop("XINFERENCE_API_KEYS", None)
    env.pop("PYTHONPATH", None)  # this repository's ``xinference`` must not shadow the original's
    command = [str(venv / "bin" / "xinference-local"), "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(  # cwd: a folder holding an ``xinference`` package would shadow the original's
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=home
        )
    server = _proc.Platform(
        "original xinference-local", process, log_path, started, endpoint=f"http://127.0.0.1:{port}", home=home
    )
    try:
        server.ready_seconds = _proc.wait_until_ok(f"{server.endpoint}/status", process, started, ready_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def launch_on_original(api: str, gguf: Path, settings: _proc.EngineSettings, timeout: float = 300.0) -> float:
    """Register the GGUF and launch it on the original's llama.cpp engine with ``settings``; the launch's seconds."""
    with _proc.http_client(timeout) as client:
        registered = client.post(
            f"{api}/model_registrations/LLM",
            json={"model": json.dumps(custom_family(gguf, settings.n_ctx)), "persist": False},
        )
        if registered.status_code != 200:
            raise RuntimeError(
                f"the original refused the registration: HTTP {registered.status_code} {registered.text[:400]}"
            )
        body = {
            "model_uid": ORIGINAL_UID,
            "model_name": ORIGINAL_MODEL,
            "model_engine": "llama.cpp",
            "model_format": "ggufv2",
            "model_size_in_billions": "0_135",
            "quantization": "Q4_1",
            "n_ctx": settings.n_ctx,
            "n_parallel": settings.n_parallel,
            "n_threads": settings.n_threads,
            "enable_virtual_env": False,  # else it makes a per-model venv and may try to install into it
        }
        started = time.perf_counter()
        launched = client.post(f"{api}/models", json=body)
        took = time.perf_counter() - started
    if launched.status_code != 200:
        raise RuntimeError(f"the original could not launch the GGUF: HTTP {launched.status_code} {launched.text[:400]}")
    return took


# -- measuring -----------------------------------------------------------------------------------------------------
def _cpu_target(side: str, api: str, model: str, processes: list[psutil.Process]) -> Target:
    return Target(side, api, model, {"server": processes}, {"server": lambda: _proc.cpu_seconds(processes)})


def summarize_sides(records: Sequence[RunRecord], levels: Sequence[int]) -> list[dict[str, Any]]:
    """Per level: each side's pooled figures, its server CPU per output token, and per-round ratios to raw."""
    out = []
    for level in levels:
        at = [r for r in records if r.step.concurrency == level]
        sides: dict[str, Any] = {}
        for side in SIDES:
            mine = [r for r in at if r.step.side == side]
            results = [x for r in mine for x in r.results]
            wall = sum(r.wall_seconds for r in mine)
            summary = summarize(results, wall) if mine else {}
            tokens = sum(x.completion_tokens for x in results if x.ok)
            cpu = sum(sum(r.cpu_seconds.values()) for r in mine)
            sides[side] = {
                "output_throughput": summary.get("output_throughput"),
                "ttft_ms_p50": summary.get("ttft_ms_p50"),
                "tpot_ms_p50": summary.get("tpot_ms_p50"),
                "errors": summary.get("errors", 0),
                "cpu_ms_per_token": cpu * 1000 / tokens if tokens else None,
            }
        rounds = sorted({r.step.round for r in at})
        ratios: dict[str, dict[str, Any] | None] = {}
        for side in SIDES[1:]:
            per_round: list[float | None] = []
            added: list[float | None] = []
            for index in rounds:
                by_side = {r.step.side: summarize(r.results, r.wall_seconds) for r in at if r.step.round == index}
                raw, other = by_side.get("raw"), by_side.get(side)
                if raw and other and raw["output_throughput"] and other["output_throughput"]:
                    per_round.append(other["output_throughput"] / raw["output_throughput"])
                if raw and other and raw["ttft_ms_p50"] is not None and other["ttft_ms_p50"] is not None:
                    added.append(other["ttft_ms_p50"] - raw["ttft_ms_p50"])
            ratio, ttft = ratio_estimate(per_round), difference_estimate(added)
            ratios[f"{side}_throughput_ratio"] = None if ratio is None else ratio.to_dict()
            ratios[f"{side}_ttft_p50_added_ms"] = None if ttft is None else ttft.to_dict()
        out.append({"concurrency": level, "sides": sides, "intervals": ratios})
    return out


def run_original(config: OriginalConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Install (unless told not to), start the three servers, run the three-sided schedule; JSON-able result."""
    venv = install_original(config.version, log) if config.install else venv_path()
    if installed_version(venv) is None:
        raise RuntimeError(f"no original Xinference in {venv} (run without --no-install)")
    gguf = _proc.bundled_gguf()
    compare = config.compare_config()
    with tempfile.TemporaryDirectory(prefix="bench-original-") as tmp, _proc.stopping_later() as later:
        work = Path(tmp)
        log("starting this platform ...")
        platform = later(_proc.start_platform(work / "ours"))
        _proc.launch_model(platform.api, MODEL_UID, compare.launch_options())
        settings = _proc.EngineSettings.from_engine_config(_proc.engine_config(platform.api, MODEL_UID))
        ours_procs = platform.tree()
        log(f"ours launched with {settings.as_dict()}; starting the original {config.version} ...")
        original = later(start_original(venv, work / "original"))
        original_ready = original.ready_seconds
        original_launch = launch_on_original(original.api, gguf, settings)
        original_procs = original.tree()
        log(f"original ready in {original_ready:.1f}s, model launched in {original_launch:.1f}s; starting raw ...")
        raw = later(_proc.start_raw_server(settings, work / "raw.log"))
        raw_procs = raw.tree()
        targets = {
            "raw": _cpu_target("raw", raw.api, "raw", raw_procs),
            "ours": _cpu_target("ours", platform.api, MODEL_UID, ours_procs),
            "original": _cpu_target("original", original.api, ORIGINAL_UID, original_procs),
        }
        for side in SIDES:
            log(f"warming up {side} ...")
            warm_up(targets[side], compare)
        records: list[RunRecord] = []
        for pair in pairs(ab_schedule(compare.rounds, compare.concurrency, SIDES)):
            for step in pair:
                record = measure(targets[step.side], step, compare)
                summary = summarize(record.results, record.wall_seconds)
                log(
                    f"round {step.round} c={step.concurrency} {step.side:>8}: "
                    f"{n(summary['output_throughput'], 1)} tok/s, TTFT p50 {n(summary['ttft_ms_p50'], 1)} ms"
                )
                records.append(record)
    return {
        "conditions": {
            **{k: v for k, v in asdict(config).items() if k != "install"},
            "concurrency": list(config.concurrency),
            "engine_settings": settings.as_dict(),
            "original_ready_seconds": original_ready,
            "original_launch_seconds": original_launch,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        },
        "levels": summarize_sides(records, config.concurrency),
    }


def _estimate(data: dict[str, Any] | None) -> Estimate | None:
    return None if data is None else Estimate.from_dict(data)


def render_markdown(result: dict[str, Any]) -> str:
    """``results/original.md``: the run's table, or the error that kept it from running."""
    lines = ["# Against the original Xinference", ""]
    if "error" in result:
        return "\n".join([*lines, f"Not measured: {result['error']}", ""])
    cond = result["conditions"]
    settings = cond["engine_settings"]
    lines += [
        f"{cond['date']}; {cond['cores']} usable cores. Original: `xinference=={cond['version']}` (PyPI) in its own "
        f"venv, its llama.cpp engine (xllamacpp), ready in {n(cond['original_ready_seconds'], 1)} s, model launch "
        f"{n(cond['original_launch_seconds'], 1)} s. Same GGUF (SmolLM2-135M-Instruct Q4_1) on all three sides; "
        f"n_ctx {settings['n_ctx']}, n_parallel {settings['n_parallel']}, threads {settings['n_threads']}. "
        f"Chat endpoint, streamed, greedy, ignore_eos, max_tokens {cond['max_tokens']}, {cond['num_prompts']} "
        f"requests per run, {cond['rounds']} rounds with the three sides in turn (order reversed every other round).",
        "",
        "Ratios are per round, ÷ raw llama.cpp: geometric mean [95% interval]. CPU: all of each side's server "
        "processes per output token.",
        "",
    ]
    rows = []
    for level in result["levels"]:
        sides, intervals = level["sides"], level["intervals"]
        rows.append(
            [
                str(level["concurrency"]),
                " / ".join(n(sides[s]["output_throughput"], 1) for s in SIDES),
                format_estimate(_estimate(intervals.get("ours_throughput_ratio")), 3),
                format_estimate(_estimate(intervals.get("original_throughput_ratio")), 3),
                " / ".join(n(sides[s]["ttft_ms_p50"], 1) for s in SIDES),
                " / ".join(n(sides[s]["cpu_ms_per_token"], 2) for s in SIDES),
                " / ".join(str(sides[s]["errors"]) for s in SIDES),
            ]
        )
    lines += table(
        [
            "c",
            "tok/s raw / ours / original",
            "ours ÷ raw",
            "original ÷ raw",
            "TTFT p50 ms raw / ours / original",
            "CPU ms/token raw / ours / original",
            "errors",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def run_and_write(config: OriginalConfig, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """:func:`run_original`, its error recorded instead of raised; writes ``original.{json,md}`` in ``out_dir``."""
    try:
        result = run_original(config, log)
    except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
        log(f"original Xinference: not measured: {exc}")
        result = {"error": str(exc)[:2000], "conditions": {"version": config.version}}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "original.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / "original.md").write_text(render_markdown(result))
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    default = OriginalConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", default=default.version, help="the original's version on PyPI")
    parser.add_argument("--rounds", type=int, default=default.rounds)
    parser.add_argument("--concurrency", type=parse_concurrency, default=list(default.concurrency))
    parser.add_argument("--num-prompts", type=int, default=default.num_prompts)
    parser.add_argument("--max-tokens", type=int, default=default.max_tokens)
    parser.add_argument("--no-install", action="store_true", help="use the venv as it is")
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmark" / "results")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.num_prompts < 1 or args.max_tokens < 1:
        parser.error("--rounds, --num-prompts and --max-tokens must each be at least 1")
    args.config = OriginalConfig(
        version=args.version,
        rounds=args.rounds,
        concurrency=tuple(args.concurrency),
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        install=not args.no_install,
    )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    result = run_and_write(args.config, args.out_dir)
    print(render_markdown(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
