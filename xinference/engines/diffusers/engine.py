"""Image generation through diffusers: text to image, image to image and inpainting on one loaded pipeline.

The pipeline folder (``model_index.json`` + one folder per component) loads once as the class it names
(``DiffusionPipeline``); diffusers' ``AutoPipelineFor*.from_pipe`` then makes the image-to-image and inpainting
pipelines of the same components (no second copy of the weights) for the abilities the family declares and the
pipeline has. On a CPU it runs in float32; on CUDA in the family's dtype (bfloat16 for FLUX/SD3/Qwen-Image) or
float16.

Requests run one at a time on the engine's own thread (a pipeline is not safe to call from two threads), so the
model actor's event loop never waits on a denoising step; the next requests wait in that thread's queue. Each step
reports its progress (``request_progress``, read by ``GET /v1/requests/{id}/progress``) and checks whether the
request was cancelled (an abort, a client that left): a cancelled generation stops before its next step. A fixed
``seed`` gives the same images (the noise comes from a CPU generator, as diffusers advises for reproducibility).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import os
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.base import Engine, Verdict
from xinference.engines.diffusers.config import DiffusersConfig, ResolvedDiffusersConfig
from xinference.engines.libraries import IMAGE_HINT
from xinference.errors import (
    EngineError,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    RequestInterrupted,
    XinferenceError,
)

if TYPE_CHECKING:
    from xinference.engines.memory import MemoryEstimate
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["TASKS", "DiffusersEngine", "GenerationCancelled"]

logger = logging.getLogger(__name__)

#: The abilities this engine serves, as Xinference names them, and the diffusers auto-pipeline of each.
TASKS: dict[str, str] = {
    "text2image": "AutoPipelineForText2Image",
    "image2image": "AutoPipelineForImage2Image",
    "inpainting": "AutoPipelineForInpainting",
}
#: Runtime memory besides the weights: activations of one batch at a usual size, the VAE's decode.
_OVERHEAD_BYTES = {"cpu": 1024**3, "cuda": 2 * 1024**3}
#: Steps a ``quality`` asks for, as a share of the default steps (OpenAI's words: low/medium/high, standard/hd).
_QUALITY_STEPS = {"low": 0.5, "medium": 1.0, "standard": 1.0, "auto": 1.0, "high": 1.5, "hd": 1.5}
#: Finished requests whose progress (1.0) is still answered, so a client polling after the end sees it complete.
_DONE_MEMORY = 256


class GenerationCancelled(Exception):
    """Raised from the step callback when the request was cancelled: it unwinds the pipeline's loop."""


@contextlib.contextmanager
def _backend_errors() -> Iterator[None]:
    try:
        yield
    except (XinferenceError, GenerationCancelled):
        raise
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes an EngineError, chained
        raise EngineError(f"diffusers failed: {type(exc).__name__}: {exc}") from exc


def _folder_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith((".safetensors", ".bin")):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(root, name))
    return total


class _Running:
    """One request in the engine: its progress and whether it was cancelled."""

    def __init__(self) -> None:
        self.progress = 0.0
        self.cancelled = threading.Event()


class DiffusersEngine(Engine):
    """diffusers pipelines (Stable Diffusion 1.5/2/XL/3, FLUX, Qwen-Image, ...) on torch, CPU or CUDA."""

    name: ClassVar[str] = "diffusers"
    model_types: ClassVar[frozenset[str]] = frozenset({"image"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"diffusers"})
    config_class = DiffusersConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.resolved: ResolvedDiffusersConfig | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pipelines: dict[str, Any] = {}
        self._running: dict[str, _Running] = {}
        self._done: dict[str, float] = {}
        self._default_steps = 50
        self._step_callback: dict[str, bool] = {}

    # -- fit ---------------------------------------------------------------------------------------------------

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        verdict = super().match(family, spec, hardware)
        if not verdict:
            return verdict
        if not any(task in family.model_ability for task in TASKS):
            return Verdict.reject(f"{cls.name} generates images (text2image, image2image, inpainting) only")
        if family.requires_gpu and not hardware.cuda_available:
            return Verdict.reject(
                f"{family.model_name} needs a CUDA GPU: on a CPU one image would take many minutes to hours and its "
                "weights do not fit a usual machine's RAM; launch it on a worker with an NVIDIA GPU, or try "
                "sd-turbo or stable-diffusion-v1.5 on this one"
            )
        return Verdict.ok()

    @classmethod
    def estimate_memory(
        cls,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        engine_kwargs: dict[str, Any],
        hardware: HardwareInfo,
    ) -> MemoryEstimate:
        """Every component's weights at the dtype they load in (float32 on a CPU: four bytes a parameter; two on
        CUDA), or the weights' files when they are already here, plus the activations of one batch."""
        from xinference.engines.memory import MemoryEstimate, size_in_billions

        config = DiffusersConfig.model_validate(
            {k: v for k, v in engine_kwargs.items() if k in DiffusersConfig.model_fields}
        ).resolve(hardware.cuda_available, _family_dtype(family))
        per_weight = 4 if config.torch_dtype == "float32" else 2
        weights = int(size_in_billions(spec) * 1e9 * per_weight)
        if spec.model_uri is not None and spec.model_uri.startswith("file://"):
            local = spec.model_uri[len("file://") :]
            if os.path.isdir(local):
                on_disk = _folder_bytes(local)
                weights = max(weights, on_disk * (2 if config.torch_dtype == "float32" else 1))
        return MemoryEstimate(weights=weights, kv_cache=0, overhead=_OVERHEAD_BYTES[config.device], context=0)

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, DiffusersConfig)
        from xinference.engines.sentence_transformers.config import usable_cores

        self.resolved = resolved = self.config.resolve(self.hardware.cuda_available, _family_dtype(self.family))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local: the hub is never asked
        threads = self.config.threads or usable_cores(self.hardware.cpu_count)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"diffusers-{self.model_uid}")
        logger.info("loading %s with diffusers: %s", self.model_uid, resolved)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self._load_pipelines, resolved, threads)
        except ImportError as exc:
            raise LaunchFailed(f"diffusers needs torch and diffusers ({IMAGE_HINT}): {exc}") from exc
        except LaunchFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"diffusers could not load {self.model_uid}: {type(exc).__name__}: {exc}") from exc
        if not self._pipelines:
            raise LaunchFailed(
                f"{self.model_uid}: the pipeline has none of the abilities the family declares "
                f"({', '.join(self.family.model_ability)})"
            )

    def _load_pipelines(self, resolved: ResolvedDiffusersConfig, threads: int) -> None:
        import diffusers
        import torch

        if resolved.device == "cpu":
            torch.set_num_threads(threads)
        dtype = getattr(torch, resolved.torch_dtype)
        base = diffusers.DiffusionPipeline.from_pretrained(self.model_path, torch_dtype=dtype)  # type: ignore[no-untyped-call]
        if resolved.scheduler is not None:
            self._swap_scheduler(base, resolved.scheduler)
        if resolved.lora_path is not None:
            self._load_lora(base, resolved.lora_path, resolved.lora_scale)
        if resolved.cpu_offload:
            base.enable_model_cpu_offload()
        else:
            base.to(resolved.device)
        if resolved.attention_slicing:
            base.enable_attention_slicing()
        base.set_progress_bar_config(disable=True)
        for task, auto_name in TASKS.items():
            if task not in self.family.model_ability:
                continue
            try:
                pipeline = getattr(diffusers, auto_name).from_pipe(base)
            except Exception as exc:  # noqa: BLE001 - the pipeline lacks this task: the others still serve
                logger.warning("%s: no %s pipeline for %s: %s", self.model_uid, task, type(base).__name__, exc)
                continue
            pipeline.set_progress_bar_config(disable=True)
            self._pipelines[task] = pipeline
            params = inspect.signature(pipeline.__call__).parameters
            self._step_callback[task] = "callback_on_step_end" in params
            steps = params.get("num_inference_steps")
            if task == "text2image" and steps is not None and isinstance(steps.default, int):
                self._default_steps = steps.default
        logger.info("%s serves %s with %s", self.model_uid, ", ".join(self._pipelines), type(base).__name__)

    @staticmethod
    def _swap_scheduler(pipeline: Any, name: str) -> None:
        import diffusers

        compatible = [cls.__name__ for cls in getattr(pipeline.scheduler, "compatibles", [])]
        if compatible and name not in compatible:
            raise LaunchFailed(
                f"scheduler {name} does not fit this pipeline ({type(pipeline).__name__}); it takes: "
                f"{', '.join(sorted(compatible))}"
            )
        pipeline.scheduler = getattr(diffusers, name).from_config(pipeline.scheduler.config)

    @staticmethod
    def _load_lora(pipeline: Any, path: str, scale: float) -> None:
        if not os.path.exists(path):
            raise LaunchFailed(f"lora_path {path!r} does not exist on this worker")
        if not hasattr(pipeline, "load_lora_weights"):
            raise LaunchFailed(f"{type(pipeline).__name__} cannot load LoRA weights")
        try:
            import peft  # noqa: F401 - diffusers loads LoRA weights through peft
        except ImportError:
            raise LaunchFailed("loading LoRA weights needs peft: pip install peft") from None
        pipeline.load_lora_weights(path, adapter_name="lora")
        pipeline.set_adapters(["lora"], adapter_weights=[scale])

    async def unload(self) -> None:
        for running in self._running.values():
            running.cancelled.set()
        self._pipelines = {}
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # -- serving -------------------------------------------------------------------------------------------------
    def request_progress(self, request_id: str) -> float | None:
        running = self._running.get(request_id)
        if running is not None:
            return running.progress
        return self._done.get(request_id)

    async def generate_images(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._pool is None or not self._pipelines:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        task = str(request.get("task") or "text2image")
        if task not in self._pipelines:
            can = ", ".join(self._pipelines)
            raise InvalidRequest(
                f"model {self.model_uid!r} cannot do {task}; it serves: {can}",
                param="image" if task == "text2image" else "model",
            )
        request_id = str(request.get("request_id") or uuid.uuid4().hex)
        if request_id in self._running:
            raise InvalidRequest(f"request_id {request_id!r} is already running", param="request_id")
        running = self._running[request_id] = _Running()
        future = asyncio.get_running_loop().run_in_executor(self._pool, self._generate, task, request, running)
        try:
            result: dict[str, Any] = await future
        except asyncio.CancelledError:
            running.cancelled.set()  # the thread stops before its next step
            raise
        except GenerationCancelled:
            raise RequestInterrupted(f"the generation of request {request_id!r} was cancelled") from None
        finally:
            self._running.pop(request_id, None)
        self._done[request_id] = 1.0
        while len(self._done) > _DONE_MEMORY:
            del self._done[next(iter(self._done))]
        return result

    def _steps(self, request: dict[str, Any]) -> int:
        assert self.resolved is not None
        steps = request.get("num_inference_steps")
        if isinstance(steps, int) and steps > 0:
            return steps
        family_steps = _family_generate(self.family).get("num_inference_steps")
        base = self.resolved.num_inference_steps or (family_steps if isinstance(family_steps, int) else None)
        base = base or self._default_steps
        share = _QUALITY_STEPS.get(str(request.get("quality") or "auto"), 1.0)
        return max(1, round(base * share))

    def _generate(self, task: str, request: dict[str, Any], running: _Running) -> dict[str, Any]:
        """One request on the engine's thread."""
        import torch

        if running.cancelled.is_set():
            raise GenerationCancelled()
        assert self.resolved is not None
        pipeline = self._pipelines[task]
        steps = self._steps(request)
        seed = request.get("seed")
        if not isinstance(seed, int):
            seed = random.randrange(2**63)
        kwargs: dict[str, Any] = {
            "prompt": str(request.get("prompt") or ""),
            "num_images_per_prompt": int(request.get("n") or 1),
            "num_inference_steps": steps,
            "generator": torch.Generator(device="cpu").manual_seed(seed),
        }
        if request.get("negative_prompt"):
            kwargs["negative_prompt"] = str(request["negative_prompt"])
        guidance = request.get("guidance_scale")
        if guidance is None:
            guidance = self.resolved.guidance_scale
        if guidance is None:
            guidance = _family_generate(self.family).get("guidance_scale")
        if guidance is not None:
            kwargs["guidance_scale"] = float(guidance)
        width, height = request.get("width"), request.get("height")
        if task != "text2image":
            kwargs.update(self._input_images(request))
            if width is None or height is None:
                width, height = kwargs["image"].size
                width, height = width - width % 8, height - height % 8
            if request.get("strength") is not None:
                kwargs["strength"] = float(request["strength"])
        if width is not None and height is not None:
            kwargs["width"], kwargs["height"] = int(width), int(height)
        if self._step_callback.get(task):
            kwargs["callback_on_step_end"] = self._callback(running, pipeline, steps)
        started = time.monotonic()
        with _backend_errors(), torch.inference_mode():
            output = pipeline(**kwargs)
        images = list(output.images)
        running.progress = 1.0
        logger.info(
            "%s: %s, %d image(s) %dx%d, %d steps in %.2fs",
            self.model_uid,
            task,
            len(images),
            images[0].width,
            images[0].height,
            steps,
            time.monotonic() - started,
        )
        fmt = str(request.get("output_format") or "png")
        return {
            "images": [_encode(image, fmt) for image in images],
            "seed": seed,
            "width": images[0].width,
            "height": images[0].height,
            "steps": steps,
        }

    @staticmethod
    def _input_images(request: dict[str, Any]) -> dict[str, Any]:
        from PIL import Image

        image = request.get("image")
        if not isinstance(image, bytes | bytearray):
            raise InvalidRequest("this request needs an input image", param="image")
        found: dict[str, Any] = {"image": Image.open(io.BytesIO(image)).convert("RGB")}
        mask = request.get("mask")
        if request.get("task") == "inpainting":
            if not isinstance(mask, bytes | bytearray):
                raise InvalidRequest("inpainting needs a mask image (white: repaint, black: keep)", param="mask")
            found["mask_image"] = Image.open(io.BytesIO(mask)).convert("L")
        return found

    @staticmethod
    def _callback(running: _Running, pipeline: Any, steps: int) -> Any:
        def on_step_end(pipe: Any, step: int, timestep: Any, callback_kwargs: dict[str, Any]) -> dict[str, Any]:
            total = getattr(pipe, "_num_timesteps", None) or steps
            running.progress = min(0.99, (step + 1) / max(1, int(total)))
            if running.cancelled.is_set():
                raise GenerationCancelled()
            return callback_kwargs

        return on_step_end

    def stats(self) -> dict[str, Any]:
        return {"running_requests": len(self._running)}


def _family_dtype(family: ModelFamily) -> str | None:
    """The dtype the catalog (or Xinference's JSON, ``default_model_config.torch_dtype``) gives the model."""
    config = family.kept_fields.get("default_model_config")
    dtype = config.get("torch_dtype") if isinstance(config, dict) else None
    return dtype if dtype in ("float16", "bfloat16", "float32") else None


def _family_generate(family: ModelFamily) -> dict[str, Any]:
    """The request defaults the catalog (or Xinference's JSON, ``default_generate_config``) gives the model: a
    distilled model's one step and no guidance (sd-turbo), FLUX.1-schnell's four."""
    config = family.kept_fields.get("default_generate_config")
    return config if isinstance(config, dict) else {}


def _encode(image: Any, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "jpeg":
        image.convert("RGB").save(buffer, format="JPEG", quality=92)
    elif fmt == "webp":
        image.save(buffer, format="WEBP", quality=92)
    else:
        image.save(buffer, format="PNG")
    return buffer.getvalue()
