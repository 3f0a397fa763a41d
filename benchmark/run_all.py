"""Every benchmark in one go, with small defaults, written up next to DESIGN §6's targets.

    python -m benchmark.run_all            # 7 rounds: an estimated 45-60 minutes on 2 idle cores (make bench)
    python -m benchmark.run_all --skip-engines --skip-engine-launch   # llama.cpp only, ~6 minutes
    python -m benchmark.run_all --with-original      # also the original Xinference (installs its venv: minutes)

Runs, each starting and stopping its own servers: :mod:`benchmark.bench_control_plane`,
:mod:`benchmark.compare_engine` (raw llama.cpp vs the platform), :mod:`benchmark.compare_vllm` and
:mod:`benchmark.compare_mlx` (each engine's own server vs the platform), :mod:`benchmark.engine_launch` (install,
launch and first token per engine), :mod:`benchmark.bench_batching`, the audio comparisons
(:mod:`benchmark.compare_stt` against raw faster-whisper, :mod:`benchmark.compare_tts` against raw piper; short
clips, ~2 minutes) and :mod:`benchmark.compare_images` (seconds per image against the raw diffusers pipeline, on a
tiny pipeline built here: the platform's overhead, ~1 minute); with ``--with-original``,
:mod:`benchmark.compare_original` (the original Xinference from PyPI in its own venv, beside raw llama.cpp and
ours). Studies other scripts leave in the output folder (``scale.json``, ``defaults.json``) are read and rendered
too. Then it writes
``benchmark/results/latest.json`` (every figure) and ``benchmark/results/latest.md`` (machine facts, the figures,
each target with met/missed, and the gaps; see :mod:`benchmark.report`). The hand-written part of ``latest.md``
between ``<!-- notes -->`` and ``<!-- /notes -->`` is kept when the file is rewritten. An engine whose comparison
fails is reported with its error; the others still run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/run_all.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmark import _proc
from benchmark.bench_batching import run_batching
from benchmark.bench_control_plane import ControlPlaneConfig, run_control_plane
from benchmark.bench_serving import parse_concurrency
from benchmark.compare_engine import CompareConfig, run_compare
from benchmark.compare_images import ImageConfig
from benchmark.engine_launch import EngineLaunchConfig, run_engine_launches
from benchmark.intervals import MIN_ROUNDS
from benchmark.report import DEFAULT_NOTES, NOTES_END, NOTES_START, extract_notes, noise_warning, render_markdown
from benchmark.targets import Verdict, evaluate_targets

__all__ = [
    "DEFAULT_NOTES",
    "NOTES_END",
    "NOTES_START",
    "Verdict",
    "evaluate_targets",
    "extract_notes",
    "load_studies",
    "main",
    "noise_warning",
    "render_markdown",
    "run",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Studies written by other scripts into the output folder, rendered when present: report key -> file stem
#: (``scale.json`` with its figures, ``scale.md`` with their own write-up, either or both).
STUDIES: dict[str, str] = {"scale": "scale", "defaults": "defaults"}
ENGINE_COMPARISONS = ("vLLM", "MLX")


# -- machine -------------------------------------------------------------------------------------------------------
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False, cwd=RESULTS_DIR.parent
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def machine_facts() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": usable,
        "cores_physical": psutil.cpu_count(logical=False),
        "ram_gib": psutil.virtual_memory().total / (1 << 30),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "xinference": _version("xinference"),
        "xllamacpp": _version("xllamacpp"),
        "xoscar": _version("xoscar"),
        "torch": _version("torch"),  # xoscar imports it in every actor pool when installed
        "commit": _git("rev-parse", "--short", "HEAD"),
        "tree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "load_average_start": list(os.getloadavg()),
    }


# -- running -------------------------------------------------------------------------------------------------------
def load_studies(folder: Path) -> dict[str, Any]:
    """The :data:`STUDIES` found in ``folder``, by report key: the JSON's figures, plus the study's own markdown
    under ``"markdown"`` when it wrote one; an unreadable JSON becomes ``{"error": ...}``."""
    found: dict[str, Any] = {}
    for key, stem in STUDIES.items():
        data, markdown = folder / f"{stem}.json", folder / f"{stem}.md"
        study: dict[str, Any] = {}
        if data.is_file():
            try:
                loaded = json.loads(data.read_text())
                study = loaded if isinstance(loaded, dict) else {"figures": loaded}
            except (OSError, ValueError) as exc:
                study = {"error": f"{data.name} could not be read: {exc}"}
        if markdown.is_file():
            study["markdown"] = markdown.read_text()
        if study:
            found[key] = study
    return found


def _control_plane(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    config = ControlPlaneConfig(
        ready_runs=args.ready_runs,
        launch_runs=args.launch_runs,
        list_calls=args.list_calls,
        tiny_calls=args.tiny_calls,
        n_parallel=args.n_parallel,
        n_ctx=args.n_ctx,
        patience=args.patience / 3,
    )
    return run_control_plane(config, log=log)


def _llama_compare(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    profile = args.profile == "on" or (args.profile == "auto" and _proc.py_spy() is not None)
    config = CompareConfig(
        rounds=args.rounds,
        concurrency=tuple(args.concurrency),
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        n_parallel=args.n_parallel,
        n_ctx=args.n_ctx,
        profile=profile,
        noise_limit=args.noise_limit,
        patience=args.patience * 2 / 3,
    )
    return run_compare(config, log=log)


def _engine_compare(name: str, args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """One engine against its own server; an error is recorded, not raised, so the other sections still run."""
    if name == "vLLM":
        from benchmark.compare_vllm import DEFAULTS
        from benchmark.compare_vllm import run_vllm_compare as runner
    else:
        from benchmark.compare_mlx import DEFAULTS
        from benchmark.compare_mlx import run_mlx_compare as runner
    config = replace(
        DEFAULTS,
        rounds=args.engine_rounds,
        concurrency=tuple(args.engine_concurrency),
        num_prompts=args.engine_prompts,
        max_tokens=args.engine_max_tokens,
        noise_limit=args.noise_limit,
    )
    try:
        return runner(config, log=log)
    except (RuntimeError, OSError) as exc:
        log(f"{name}: comparison failed: {exc}")
        return {"error": str(exc)[:1000]}


#: Texts of the text-to-speech part of ``run_all``: the four shortest of compare_tts's (a short run)
AUDIO_TTS_TEXTS = 4
#: Clips per round of the speech-to-text part (each two or three sentences)
AUDIO_STT_CLIPS = 2


def _guarded(name: str, log: Callable[[str], None], call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``, or ``{"error": ...}`` when it fails, so that the other sections still run."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - any failure of one comparison is reported, not raised
        log(f"{name}: failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"[:1000]}


def _audio(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Speech to text and text to speech against their raw engines, short clips, ``--audio-rounds`` rounds."""
    from benchmark import compare_stt, compare_tts

    levels = tuple(args.audio_levels)
    texts = sorted(compare_tts.TEXTS, key=len)[:AUDIO_TTS_TEXTS]
    return {
        "stt": _guarded(
            "speech to text",
            log,
            lambda: compare_stt.run_comparison(args.audio_rounds, levels, AUDIO_STT_CLIPS),
        ),
        "tts": _guarded("text to speech", log, lambda: compare_tts.run_comparison(args.audio_rounds, levels, texts)),
    }


def _images(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from benchmark.compare_images import run_comparison

    config = ImageConfig(rounds=args.image_rounds, images=args.images_per_round)
    return _guarded("images", log, lambda: run_comparison(config, log=log))


def _original(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from benchmark.compare_original import OriginalConfig, run_and_write

    config = OriginalConfig(
        version=args.original_version,
        rounds=args.original_rounds,
        concurrency=tuple(args.concurrency),
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
    )
    return run_and_write(config, args.out_dir, log)


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every section not skipped, in order; returns the report that :func:`render_markdown` writes up."""
    report: dict[str, Any] = {"machine": machine_facts()}
    started = time.perf_counter()
    if not args.skip_control_plane:
        log("== control plane ==")
        report["control_plane"] = _control_plane(args, log)
    if not args.skip_compare:
        log("== raw llama.cpp vs platform ==")
        report["compare"] = _llama_compare(args, log)
    if not args.skip_engines:
        report["engines"] = {}
        for name in args.engines:
            log(f"== raw {name} vs platform ==")
            report["engines"][name] = _engine_compare(name, args, log)
    if not args.skip_engine_launch:
        log("== install, launch and first token per engine ==")
        report["engine_launch"] = run_engine_launches(EngineLaunchConfig(install=args.install), log=log)
    if not args.skip_batching:
        log("== batching: embeddings and Transformers ==")
        report["batching"] = run_batching()
    if not args.skip_audio:
        log("== audio: speech to text vs faster-whisper, text to speech vs piper ==")
        report["audio"] = _audio(args, log)
    if not args.skip_images:
        log("== images: /v1/images/generations vs the raw diffusers pipeline ==")
        report["images"] = _images(args, log)
    if args.with_original:
        log("== the original Xinference vs raw llama.cpp and ours ==")
        report["original"] = _original(args, log)
    report.update(load_studies(args.out_dir))
    report["machine"]["load_average_end"] = list(os.getloadavg())
    report["duration_seconds"] = time.perf_counter() - started
    report["targets"] = [
        {
            "name": v.name,
            "value": v.value,
            "unit": v.unit,
            "target": v.target,
            "status": v.status,
            "interval": v.interval,
            "rounds": v.rounds,
        }
        for v in evaluate_targets(report)
    ]
    report["noise_warning"] = noise_warning(report, args.noise_limit)
    return report


def _engine_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(ENGINE_COMPARISONS))
    if unknown:
        raise argparse.ArgumentTypeError(f"no comparison for {unknown}; known: {list(ENGINE_COMPARISONS)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from benchmark.compare_vllm import DEFAULTS as ENGINE_DEFAULTS

    compare, control = CompareConfig(), ControlPlaneConfig()
    parser = argparse.ArgumentParser(description="Run every benchmark and write benchmark/results/latest.{md,json}.")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--rounds", type=int, default=compare.rounds)
    parser.add_argument("--concurrency", type=parse_concurrency, default=list(compare.concurrency))
    parser.add_argument("--num-prompts", type=int, default=compare.num_prompts)
    parser.add_argument("--max-tokens", type=int, default=compare.max_tokens)
    parser.add_argument("--n-parallel", type=int, default=compare.n_parallel)
    parser.add_argument("--n-ctx", type=int, default=compare.n_ctx)
    parser.add_argument(
        "--engines",
        type=_engine_list,
        default=list(ENGINE_COMPARISONS),
        help="engines compared with their own servers besides llama.cpp (default: vLLM,MLX)",
    )
    parser.add_argument("--engine-rounds", type=int, default=ENGINE_DEFAULTS.rounds)
    parser.add_argument("--engine-concurrency", type=parse_concurrency, default=list(ENGINE_DEFAULTS.concurrency))
    parser.add_argument("--engine-prompts", type=int, default=ENGINE_DEFAULTS.num_prompts)
    parser.add_argument("--engine-max-tokens", type=int, default=ENGINE_DEFAULTS.max_tokens)
    parser.add_argument(
        "--install",
        action="store_true",
        help="time a fresh install of each engine env (into a temporary folder; minutes)",
    )
    parser.add_argument("--ready-runs", type=int, default=control.ready_runs)
    parser.add_argument("--launch-runs", type=int, default=control.launch_runs)
    parser.add_argument("--list-calls", type=int, default=control.list_calls)
    parser.add_argument("--tiny-calls", type=int, default=control.tiny_calls)
    parser.add_argument("--noise-limit", type=float, default=compare.noise_limit)
    parser.add_argument(
        "--patience",
        type=float,
        default=300.0,
        help="extra seconds in all (1/3 control plane, 2/3 comparison) for waiting out other people's load",
    )
    parser.add_argument(
        "--profile", choices=("auto", "on", "off"), default="auto", help="py-spy run of the platform (auto: if found)"
    )
    parser.add_argument("--skip-control-plane", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-engines", action="store_true", help="no vLLM/MLX comparisons")
    parser.add_argument("--skip-engine-launch", action="store_true")
    parser.add_argument("--skip-batching", action="store_true")
    parser.add_argument("--skip-audio", action="store_true", help="no speech-to-text / text-to-speech comparisons")
    parser.add_argument("--skip-images", action="store_true", help="no image-generation comparison")
    parser.add_argument("--audio-rounds", type=_at_least_one, default=MIN_ROUNDS)
    parser.add_argument("--audio-levels", type=parse_concurrency, default=[1, 4])
    parser.add_argument("--image-rounds", type=_at_least_one, default=MIN_ROUNDS)
    parser.add_argument("--images-per-round", type=_at_least_one, default=ImageConfig().images)
    parser.add_argument(
        "--with-original",
        action="store_true",
        help="also the original Xinference from PyPI, in its own venv (installed on first use: minutes, ~1.5 GB)",
    )
    parser.add_argument("--original-version", default=None, help="its version (default: compare_original's)")
    parser.add_argument("--original-rounds", type=_at_least_one, default=3)
    args = parser.parse_args(argv)
    if args.original_version is None:
        from benchmark.compare_original import DEFAULT_VERSION

        args.original_version = DEFAULT_VERSION
    return args


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _proc.exit_on_sigterm()
    report = run(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = args.out_dir / "latest.md", args.out_dir / "latest.json"
    notes = extract_notes(md_path.read_text()) if md_path.is_file() else None
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    md_path.write_text(render_markdown(report, notes))
    print(f"\nwrote {md_path} and {json_path} in {report['duration_seconds']:.0f}s")
    for verdict in evaluate_targets(report):
        print(f"{verdict.status:>12}  {verdict.name}: {verdict.measured} (target {verdict.target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
