"""Image generation through the platform against the raw diffusers pipeline in-process: seconds per image.

No real diffusion model ships with this repository (the catalog's are gigabytes, from a hub this machine cannot
reach), so both sides run a small Stable Diffusion pipeline built here from diffusers' and transformers' own classes
with seeded random weights (:func:`build_pipeline`, the tests' own builder with a UNet twice as wide as theirs,
and 128x128 in 8 steps by default, so that one image takes about 0.3 s on 2 idle cores). Its images mean nothing,
but every step runs the real pipeline code.
What this measures is therefore **the platform's overhead** (HTTP, validation, the actor hop, PNG encoding and base64
in the answer) against the denoising work of this pipeline, not the speed of any real model: with a real model an
image takes seconds to minutes and the same overhead is a far smaller share.

* **raw diffusers**: ``DiffusionPipeline.from_pretrained`` in this process, float32 on the CPU, torch's threads
  set as the platform's engine sets them (the usable cores); each request calls the pipeline with the prompt,
  steps, size, guidance and a seeded CPU generator, and encodes the image to PNG (the bytes a caller needs).
* **platform**: one ``xinference-local`` with the folder registered as a custom image model and launched on the
  diffusers engine; each request is ``POST /v1/images/generations`` (``response_format: b64_json``, the same
  prompt, steps, size and seed), the PNG decoded from the answer.

Each of ``--rounds`` rounds (at least 7 by default) draws fresh prompts and runs ``--images`` requests on each side,
the sides alternating which goes first. Per round: seconds per image on each side, the CPU seconds per image of
each side's server (this process for raw, the platform's API and model processes for ours: what a busy shared
machine changes least), and ours ÷ raw in images/s (raw seconds ÷ our seconds); over rounds the geometric mean
with its 95% interval (:mod:`benchmark.intervals`) and the mean milliseconds the platform adds per image. Both
sides give the same image for the same seed (checked).

    python -m benchmark.compare_images [--rounds 7] [--images 3] [--steps 8] [--size 128] [--out-dir benchmark/results]
    python -m benchmark.compare_images --smoke      # 2 rounds of 1 image on the smallest pipeline (tests)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmark._audio import machine_conditions, versions
from benchmark._md import n, table
from benchmark._proc import cpu_seconds, start_platform
from benchmark.intervals import MIN_ROUNDS, Estimate, difference_estimate, format_estimate, ratio_estimate

__all__ = [
    "RAW",
    "OURS",
    "ImageConfig",
    "build_pipeline",
    "main",
    "parse_args",
    "render_markdown",
    "round_prompts",
    "run_comparison",
    "summarize_rounds",
]

RAW, OURS = "raw diffusers", "platform"
MODEL = "bench-tiny-sd"
WORDS = ("red", "blue", "green", "small", "large", "old", "new", "quiet", "bright", "dark", "round", "tall")
THINGS = ("house", "boat", "tree", "cat", "lamp", "hill", "river", "bridge", "garden", "tower", "road", "cloud")
#: A pipeline folder's build settings, keyed into its cache folder's name so that a change rebuilds it.
PIPELINE_VERSION = 1


@dataclass(frozen=True)
class ImageConfig:
    """One comparison's settings. ``channels`` are the UNet's block widths (the VAE's are a quarter)."""

    rounds: int = MIN_ROUNDS
    images: int = 3
    steps: int = 8
    size: int = 128
    guidance_scale: float = 5.0
    channels: tuple[int, int] = (16, 32)
    #: ``cpu`` (float32) or ``cuda`` (float16), on both sides: the platform is launched with the same ``device``
    device: str = "cpu"

    def validate(self) -> None:
        if self.rounds < 1 or self.images < 1 or self.steps < 1:
            raise ValueError("rounds, images and steps must each be at least 1")
        if self.size < 64 or self.size % 8:
            raise ValueError(f"size must be a multiple of 8 of at least 64, got {self.size}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, got {self.device!r}")

    @property
    def dtype(self) -> str:
        """The dtype the platform's engine resolves for this device (``torch_dtype`` auto)."""
        return "float32" if self.device == "cpu" else "float16"


SMOKE = ImageConfig(rounds=2, images=1, steps=2, size=64, channels=(8, 16))


def round_prompts(round_index: int, count: int) -> list[str]:
    """``count`` prompts for round ``round_index``, seeded by the round (fresh each round, the same on a rerun);
    lower-case letters only, as the pipeline's tokenizer knows nothing else."""
    rng = random.Random(5000 + round_index)
    return [
        f"a {rng.choice(WORDS)} {rng.choice(THINGS)} by a {rng.choice(WORDS)} {rng.choice(THINGS)}"
        for _ in range(count)
    ]


def build_pipeline(cache: Path, channels: tuple[int, int]) -> Path:
    """A Stable Diffusion pipeline with seeded random weights saved by ``save_pretrained`` under ``cache`` (built
    once per ``channels``; later calls reuse the folder): the tests' tiny pipeline, as wide as asked."""
    from tests.diffusion_models import build_tiny_sd

    return build_tiny_sd(cache / f"tiny-sd-v{PIPELINE_VERSION}-{channels[0]}x{channels[1]}", channels)


def _family(path: Path) -> dict[str, Any]:
    return {
        "model_name": MODEL,
        "model_type": "image",
        "model_ability": ["text2image"],
        "model_specs": [
            {
                "model_format": "diffusers",
                "model_size_in_billions": "0_001",
                "quantizations": ["none"],
                "model_uri": f"file://{path}",
            }
        ],
    }


Generate = Callable[[str, int], tuple[float, bytes]]  # (prompt, seed) → (seconds, the PNG)


def _pixels_digest(png: bytes) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return hashlib.sha256(image.convert("RGB").tobytes()).hexdigest()


def engine_threads() -> int:
    """torch's CPU threads as the diffusers engine sets them for a default launch on this machine."""
    from xinference.engines.sentence_transformers.config import usable_cores
    from xinference.hardware.host import usable_cpu_count

    return usable_cores(usable_cpu_count())


def raw_pipeline(path: Path, config: ImageConfig, threads: int) -> Generate:
    """The pipeline in this process; each call generates one image and encodes it to PNG."""
    import torch
    from diffusers import DiffusionPipeline

    if config.device == "cpu":
        torch.set_num_threads(threads)
    dtype = getattr(torch, config.dtype)
    pipeline = DiffusionPipeline.from_pretrained(str(path), torch_dtype=dtype)  # type: ignore[no-untyped-call]
    pipeline.to(config.device)
    pipeline.set_progress_bar_config(disable=True)

    def generate(prompt: str, seed: int) -> tuple[float, bytes]:
        start = time.perf_counter()
        with torch.inference_mode():
            output = pipeline(
                prompt=prompt,
                num_images_per_prompt=1,
                num_inference_steps=config.steps,
                guidance_scale=config.guidance_scale,
                width=config.size,
                height=config.size,
                generator=torch.Generator(device="cpu").manual_seed(seed),
            )
        buffer = io.BytesIO()
        output.images[0].save(buffer, format="PNG")
        took = time.perf_counter() - start
        return took, buffer.getvalue()

    return generate


def platform_generate(api: str, config: ImageConfig) -> Generate:
    """One image through ``POST /v1/images/generations`` (b64_json)."""
    client = httpx.Client(timeout=300)

    def generate(prompt: str, seed: int) -> tuple[float, bytes]:
        body = {
            "model": MODEL,
            "prompt": prompt,
            "n": 1,
            "size": f"{config.size}x{config.size}",
            "response_format": "b64_json",
            "num_inference_steps": config.steps,
            "guidance_scale": config.guidance_scale,
            "seed": seed,
        }
        start = time.perf_counter()
        response = client.post(f"{api}/images/generations", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
        png = base64.b64decode(response.json()["data"][0]["b64_json"])
        took = time.perf_counter() - start
        return took, png

    return generate


def _side(
    generate: Generate, prompts: Sequence[str], seeds: Sequence[int], cpu: Callable[[], float] | None = None
) -> dict[str, Any]:
    """Every prompt once, one at a time: seconds per image (mean), the CPU seconds per image that ``cpu`` (a
    reader of the side's server CPU seconds) counted, and the images' digests (taken after the CPU is read)."""
    before = cpu() if cpu is not None else None
    results = [generate(prompt, seed) for prompt, seed in zip(prompts, seeds, strict=True)]
    spent = None if cpu is None or before is None else cpu() - before
    times = [took for took, _ in results]
    return {
        "images": len(results),
        "seconds_per_image": sum(times) / len(times),
        "cpu_seconds_per_image": None if spent is None else spent / len(results),
        "seconds": times,
        "digests": [_pixels_digest(png) for _, png in results],
    }


def summarize_rounds(rounds: Sequence[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Over rounds: median seconds per image per side, ours ÷ raw in images/s (raw s ÷ ours s per round: geometric
    mean and 95% interval) and the milliseconds the platform adds per image (mean and interval), as
    :class:`~benchmark.intervals.Estimate` dicts; and the share of images identical on both sides."""
    speed = ratio_estimate([r[RAW]["seconds_per_image"] / r[OURS]["seconds_per_image"] for r in rounds])
    added = difference_estimate([(r[OURS]["seconds_per_image"] - r[RAW]["seconds_per_image"]) * 1000 for r in rounds])
    same = total = 0
    for r in rounds:
        for ours, raw in zip(r[OURS]["digests"], r[RAW]["digests"], strict=True):
            same += ours == raw
            total += 1
    cpu = {
        side: [r[side]["cpu_seconds_per_image"] for r in rounds if r[side].get("cpu_seconds_per_image") is not None]
        for side in (RAW, OURS)
    }
    return {
        "seconds_per_image": {
            side: statistics.median(r[side]["seconds_per_image"] for r in rounds) for side in (RAW, OURS)
        },
        "cpu_seconds_per_image": {side: statistics.median(v) if v else None for side, v in cpu.items()},
        "images_per_second_ratio": None if speed is None else speed.to_dict(),
        "added_ms_per_image": None if added is None else added.to_dict(),
        "same_image_share": same / total if total else None,
    }


def run_comparison(
    config: ImageConfig, cache: Path | None = None, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Build (or reuse) the pipeline, start a platform with it launched, and run the interleaved rounds."""
    config.validate()
    cache = cache or Path.home() / ".cache" / "xinference" / "bench"
    path = build_pipeline(cache, config.channels)
    threads = engine_threads()
    with tempfile.TemporaryDirectory(prefix="bench-images-") as home:
        server = start_platform(Path(home))
        try:
            registered = httpx.post(
                f"{server.api}/model_registrations/image", json={"model": _family(path)}, timeout=60
            )
            if registered.status_code != 200:
                raise RuntimeError(f"registration failed: HTTP {registered.status_code} {registered.text[:300]}")
            launched = httpx.post(
                f"{server.api}/models",
                json={"model_name": MODEL, "model_type": "image", "model_uid": MODEL, "device": config.device},
                timeout=300,
            )
            if launched.status_code != 200:
                raise RuntimeError(f"launch failed: HTTP {launched.status_code} {launched.text[:300]}")
            sides: dict[str, Generate] = {
                RAW: raw_pipeline(path, config, threads),
                OURS: platform_generate(server.api, config),
            }
            server_tree = server.tree()  # the API process and the model process, both started by now
            cpu: dict[str, Callable[[], float]] = {
                RAW: time.process_time,  # the pipeline runs in this process
                OURS: lambda: cpu_seconds(server_tree),
            }
            warm = round_prompts(-1, 1)
            for generate in sides.values():  # warm-up: caches, the first call's allocations, the connection
                _side(generate, warm, [0])
            measured: list[dict[str, dict[str, Any]]] = []
            for index in range(config.rounds):
                prompts = round_prompts(index, config.images)
                seeds = [index * 100 + i for i in range(config.images)]
                order = [RAW, OURS] if index % 2 == 0 else [OURS, RAW]
                this = {side: _side(sides[side], prompts, seeds, cpu[side]) for side in order}
                measured.append(this)
                log(
                    f"images round {index + 1}/{config.rounds}: raw {this[RAW]['seconds_per_image']:.3f} s, "
                    f"ours {this[OURS]['seconds_per_image']:.3f} s per image"
                )
        finally:
            server.stop()
    return {
        "conditions": {
            **machine_conditions(),
            **asdict(config),
            "threads": threads,
            "pipeline": f"StableDiffusionPipeline, seeded random weights, UNet blocks {config.channels}, "
            "2-layer CLIP text encoder, 2-block VAE (built by benchmark/compare_images.py)",
            "versions": versions(("diffusers", "torch", "transformers", "pillow")),
        },
        "rounds": measured,
        "summary": summarize_rounds(measured),
    }


def _estimate(data: dict[str, Any] | None) -> Estimate | None:
    return None if data is None else Estimate.from_dict(data)


def render_markdown(result: dict[str, Any]) -> str:
    """The comparison's own write-up (``results/images.md``)."""
    cond, summary = result["conditions"], result["summary"]
    seconds = summary["seconds_per_image"]
    same = summary.get("same_image_share")
    lines = [
        "# Image generation: the platform against the raw diffusers pipeline",
        "",
        f"{cond['date']}; {cond['machine']}; {cond['pipeline']}; {cond['size']}x{cond['size']}, {cond['steps']} "
        f"steps, guidance {cond['guidance_scale']:g}, {cond.get('device', 'cpu')} "
        f"({'float32' if cond.get('device', 'cpu') == 'cpu' else 'float16'}), {cond['threads']} torch threads on both "
        f"sides; {cond['images']} images per side per round, {cond['rounds']} interleaved rounds, fresh prompts each "
        "round. Versions: " + ", ".join(f"{k} {v}" for k, v in cond["versions"].items()) + ".",
        "",
        "The pipeline is tiny and random: this measures the platform's overhead per image (HTTP, the actor hop, PNG "
        "and base64), not a real model's speed. Ratio: images/s ours ÷ raw per round, geometric mean [95% interval].",
        "",
        *table(
            [
                "s/image raw",
                "s/image ours",
                "CPU s/image raw / ours",
                "images/s ours ÷ raw",
                "ms added per image",
                "same image",
            ],
            [
                [
                    n(seconds[RAW], 3),
                    n(seconds[OURS], 3),
                    " / ".join(n((summary.get("cpu_seconds_per_image") or {}).get(side), 3) for side in (RAW, OURS)),
                    format_estimate(_estimate(summary.get("images_per_second_ratio")), 3),
                    format_estimate(_estimate(summary.get("added_ms_per_image")), 1, sign=True),
                    "-" if same is None else f"{same:.0%}",
                ]
            ],
        ),
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    default = ImageConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=default.rounds)
    parser.add_argument("--images", type=int, default=default.images, help="images per side per round")
    parser.add_argument("--steps", type=int, default=default.steps)
    parser.add_argument("--size", type=int, default=default.size, help="image side in pixels (multiple of 8)")
    parser.add_argument("--smoke", action="store_true", help="2 rounds of 1 image on the smallest pipeline")
    parser.add_argument("--out-dir", type=Path, default=Path("benchmark/results"))
    args = parser.parse_args(argv)
    args.config = (
        SMOKE if args.smoke else ImageConfig(rounds=args.rounds, images=args.images, steps=args.steps, size=args.size)
    )
    try:
        args.config.validate()
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = run_comparison(args.config)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "images.json").write_text(json.dumps(result, indent=2) + "\n")
    markdown = render_markdown(result)
    (args.out_dir / "images.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
