"""The diffusers engine in-process on a tiny random Stable Diffusion pipeline built at test time
(``tests/diffusion_models.py``): sizes, batches, seeds, image-to-image, inpainting, progress and cancellation; and
its fit (matching, GPU-only families, memory, options) without loading anything."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.diffusion_models import build_tiny_sd, tiny_sd_family
from xinference.engines.diffusers.config import DiffusersConfig
from xinference.engines.diffusers.engine import DiffusersEngine
from xinference.engines.matcher import choose_engine
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.hardware import HardwareInfo
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

pytest.importorskip("diffusers")
pytest.importorskip("PIL")

CPU = HardwareInfo(
    os="Linux", arch="x86_64", cpu_count=2, ram_total_bytes=64 << 30, ram_free_bytes=60 << 30, cuda_available=False
)


def _png(data: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return image


# -- fit, nothing loaded ------------------------------------------------------------------------------------------
def test_config_resolves_dtype_per_device_and_refuses_unknown_options() -> None:
    assert DiffusersConfig().resolve(gpu=False, family_dtype="bfloat16").torch_dtype == "float32"
    assert DiffusersConfig().resolve(gpu=True, family_dtype="bfloat16").torch_dtype == "bfloat16"
    assert DiffusersConfig().resolve(gpu=True, family_dtype=None).torch_dtype == "float16"
    assert not DiffusersConfig(cpu_offload=True).resolve(gpu=False, family_dtype=None).cpu_offload
    with pytest.raises(InvalidRequest, match="scheduler"):
        DiffusersEngine.parse_config({"scheduler": "NoSuchScheduler"})
    with pytest.raises(InvalidRequest, match="lora_path"):
        DiffusersEngine.parse_config({"lora_path": "relative/lora.safetensors"})
    with pytest.raises(InvalidRequest, match="does not take a launch option 'steps'"):
        DiffusersEngine.parse_config({"steps": 4})


def test_catalog_models_match_with_reasons_and_memory() -> None:
    registry = ModelRegistry()
    sd15 = registry.get("stable-diffusion-v1.5", "image")
    found = choose_engine(None, registry.choices(sd15), CPU)
    assert found.engine == "diffusers"
    flux = registry.get("FLUX.1-dev", "image")
    verdict = DiffusersEngine.match(flux, flux.model_specs[0], CPU)
    assert not verdict and "needs a CUDA GPU" in verdict.reason
    gpu = CPU.model_copy(update={"cuda_available": True})
    assert DiffusersEngine.match(flux, flux.model_specs[0], gpu)
    # float32 on a CPU: 4 bytes a parameter of SD 1.5's ~1.07 B
    estimate = DiffusersEngine.estimate_memory(sd15, sd15.model_specs[0], "none", {}, CPU)
    assert 3.5e9 < estimate.weights < 5e9 and estimate.kv_cache == 0
    half = DiffusersEngine.estimate_memory(sd15, sd15.model_specs[0], "none", {"torch_dtype": "float16"}, CPU)
    assert half.weights * 2 == estimate.weights
    chat = registry.get("smollm2-instruct")
    assert "does not serve LLM" in DiffusersEngine.match(chat, chat.model_specs[0], CPU).reason


# -- a loaded pipeline ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_sd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_sd(tmp_path_factory.mktemp("diffusion") / "tiny-sd")


@pytest.fixture(scope="module")
def engine(tiny_sd: Path) -> Iterator[DiffusersEngine]:
    family = ModelFamily.model_validate(tiny_sd_family("tiny-sd", tiny_sd))
    loop = asyncio.new_event_loop()
    eng = DiffusersEngine(
        model_uid="tiny-sd",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(tiny_sd),
        config=DiffusersConfig(num_inference_steps=3),
        hardware=CPU,
    )
    loop.run_until_complete(eng.load())
    eng._test_loop = loop  # type: ignore[attr-defined]
    yield eng
    loop.run_until_complete(eng.unload())
    loop.close()


def _run(engine: DiffusersEngine, coro: Any) -> Any:
    return engine._test_loop.run_until_complete(coro)  # type: ignore[attr-defined]


def test_text_to_image_has_the_size_count_and_seed_asked_for(engine: DiffusersEngine) -> None:
    result = _run(engine, engine.generate_images({"prompt": "a red cat", "n": 2, "width": 64, "height": 48, "seed": 7}))
    assert len(result["images"]) == 2 and result["seed"] == 7 and result["steps"] == 3
    assert [_png(data).size for data in result["images"]] == [(64, 48), (64, 48)]
    again = _run(engine, engine.generate_images({"prompt": "a red cat", "n": 2, "width": 64, "height": 48, "seed": 7}))
    assert again["images"] == result["images"]
    other = _run(engine, engine.generate_images({"prompt": "a red cat", "n": 2, "width": 64, "height": 48, "seed": 8}))
    assert other["images"][0] != result["images"][0]
    unseeded = _run(engine, engine.generate_images({"prompt": "a cat"}))
    assert isinstance(unseeded["seed"], int) and _png(unseeded["images"][0]).size == (64, 64)  # the UNet's default


def test_quality_output_format_and_negative_prompt(engine: DiffusersEngine) -> None:
    from PIL import Image

    low = _run(engine, engine.generate_images({"prompt": "cat", "quality": "low", "seed": 1, "output_format": "jpeg"}))
    assert low["steps"] == 2  # half of the launch's 3 steps, rounded
    assert Image.open(io.BytesIO(low["images"][0])).format == "JPEG"
    negative = _run(engine, engine.generate_images({"prompt": "cat", "negative_prompt": "dog", "seed": 1}))
    plain = _run(engine, engine.generate_images({"prompt": "cat", "seed": 1}))
    assert negative["images"] != plain["images"]


def test_image_to_image_and_inpainting_keep_the_input_size(engine: DiffusersEngine) -> None:
    from PIL import Image

    source = io.BytesIO()
    Image.new("RGB", (80, 56), (200, 30, 30)).save(source, format="PNG")
    mask = io.BytesIO()
    Image.new("L", (80, 56), 255).save(mask, format="PNG")
    edited = _run(
        engine,
        engine.generate_images(
            {"task": "image2image", "prompt": "blue", "image": source.getvalue(), "strength": 0.7, "seed": 3}
        ),
    )
    assert _png(edited["images"][0]).size == (80, 56)
    painted = _run(
        engine,
        engine.generate_images(
            {"task": "inpainting", "prompt": "x", "image": source.getvalue(), "mask": mask.getvalue(), "seed": 3}
        ),
    )
    assert _png(painted["images"][0]).size == (80, 56)
    with pytest.raises(InvalidRequest, match="mask"):
        _run(engine, engine.generate_images({"task": "inpainting", "prompt": "x", "image": source.getvalue()}))


def test_progress_and_cancellation_between_steps(engine: DiffusersEngine) -> None:
    seen: list[float] = []
    request = {"prompt": "slow", "num_inference_steps": 60, "width": 64, "height": 64, "request_id": "r-cancel"}

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(engine.generate_images(request))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            progress = engine.request_progress("r-cancel")
            if progress is not None and progress > 0:
                seen.append(progress)
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(engine, cancel_midway())
    assert seen and 0 < seen[0] < 1
    assert engine.request_progress("r-cancel") is None  # cancelled: neither running nor done
    # the thread stops within a step: the next request is served at once, not after 60 steps
    started = time.monotonic()
    done = _run(engine, engine.generate_images({"prompt": "next", "request_id": "r-next", "seed": 1}))
    assert done["images"] and engine.request_progress("r-next") == 1.0
    quick = time.monotonic() - started
    started = time.monotonic()
    full = _run(engine, engine.generate_images({"prompt": "x", "num_inference_steps": 60, "seed": 1}))
    assert full["steps"] == 60
    assert quick < time.monotonic() - started


def test_a_pipeline_without_the_ability_says_so(tiny_sd: Path) -> None:
    family = ModelFamily.model_validate({**tiny_sd_family("t2i-only", tiny_sd), "model_ability": ["text2image"]})
    eng = DiffusersEngine(
        model_uid="t2i-only",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(tiny_sd),
        config=DiffusersConfig(num_inference_steps=1),
        hardware=CPU,
    )
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(eng.load())
        with pytest.raises(InvalidRequest, match="cannot do image2image; it serves: text2image"):
            loop.run_until_complete(eng.generate_images({"task": "image2image", "prompt": "x", "image": b""}))
    finally:
        loop.run_until_complete(eng.unload())
        loop.close()


def test_a_scheduler_that_does_not_fit_fails_the_launch(tiny_sd: Path) -> None:
    family = ModelFamily.model_validate(tiny_sd_family("tiny-sched", tiny_sd))
    for name, ok in (("DPMSolverMultistepScheduler", True), ("FlowMatchEulerDiscreteScheduler", False)):
        eng = DiffusersEngine(
            model_uid="tiny-sched",
            family=family,
            spec=family.model_specs[0],
            quantization="none",
            model_path=str(tiny_sd),
            config=DiffusersConfig(scheduler=name, num_inference_steps=2),
            hardware=CPU,
        )
        loop = asyncio.new_event_loop()
        try:
            if ok:
                loop.run_until_complete(eng.load())
                assert type(eng._pipelines["text2image"].scheduler).__name__ == name
            else:
                with pytest.raises(LaunchFailed, match="does not fit this pipeline"):
                    loop.run_until_complete(eng.load())
        finally:
            loop.run_until_complete(eng.unload())
            loop.close()


def test_lora_weights_change_the_images_by_their_scale(tiny_sd: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from tests.diffusion_models import build_tiny_lora

    lora = build_tiny_lora(tiny_sd, tmp_path / "lora")
    family = ModelFamily.model_validate(tiny_sd_family("tiny-lora", tiny_sd))
    request = {"prompt": "a cat", "width": 64, "height": 64, "seed": 5}

    def draw(**options: Any) -> bytes:
        eng = DiffusersEngine(
            model_uid="tiny-lora",
            family=family,
            spec=family.model_specs[0],
            quantization="none",
            model_path=str(tiny_sd),
            config=DiffusersConfig(num_inference_steps=2, **options),
            hardware=CPU,
        )
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(eng.load())
            image: bytes = loop.run_until_complete(eng.generate_images(dict(request)))["images"][0]
            return image
        finally:
            loop.run_until_complete(eng.unload())
            loop.close()

    plain = draw()
    assert draw(lora_path=str(lora)) != plain
    assert draw(lora_path=str(lora), lora_scale=0.0) == plain
    with pytest.raises(LaunchFailed, match="does not exist"):
        draw(lora_path=str(tmp_path / "missing.safetensors"))
