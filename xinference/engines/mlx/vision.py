"""Vision-language models on MLX through mlx-vlm: loading, a request's image inputs, and decoding one request.

A family with the ``vision`` ability is loaded with ``mlx_vlm.load`` (the model's vision tower, projector and
language model as mlx-vlm builds them, and the model's own processor) instead of mlx-lm. mlx-lm's batch generator
only takes token ids, so these models decode one request at a time (:meth:`Scheduler` mode ``vision``) with
mlx-vlm's ``generate_step``, which computes the prompt's embeddings with the image features merged in before the
prefill, then decodes text; the platform's samplers and logits processors (:mod:`.sampling`) plug into it as they
do into mlx-lm.

A request's images are decoded with :func:`xinference.model.images.load_images`, and the prompt the platform
rendered (the template writes one image placeholder per image part) goes through the model's processor with them:
the processor expands each placeholder into the image's tokens, so the prompt's ids, and ``usage.prompt_tokens``,
count them. mlx-vlm's own ``prepare_inputs`` is not used: it passes text options (``padding``) that Transformers
5.24's image processors refuse.

Weights: folders laid out as the hub's repositories are (safetensors in the Transformers 4 layout that mlx-vlm's
``sanitize`` maps, or mlx-community conversions). A folder saved by Transformers 5 names some weights differently
(LLaVA's CLIP tower without its ``vision_model.`` level); mlx-vlm refuses those with the parameters it could not
place, and the launch fails with that message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from xinference.errors import InvalidRequest, LaunchFailed

__all__ = ["VisionInputs", "load_vision_model", "vision_inputs", "vision_steps"]

logger = logging.getLogger(__name__)


@dataclass
class VisionInputs:
    """What the processor made of one prompt: its ids (image tokens included) and the model's other inputs
    (``pixel_values``, the attention mask, and whatever the architecture adds, e.g. Qwen2-VL's
    ``image_grid_thw``) as numpy arrays, turned into mlx arrays on the decode thread."""

    ids: list[int]
    arrays: dict[str, Any]


def load_vision_model(model_path: str, *, trust_remote_code: bool) -> tuple[Any, Any]:
    """``(model, processor)`` of a vision-language folder through mlx-vlm; LaunchFailed with an install hint
    when mlx-vlm is missing."""
    try:
        from mlx_vlm import load
    except ImportError as exc:
        raise LaunchFailed(
            f"vision models on MLX need mlx-vlm in the model process; reinstall the engine's environment with "
            f"`xinference engine install MLX`: {exc}"
        ) from exc
    model, processor = load(model_path, trust_remote_code=trust_remote_code)
    if getattr(processor, "tokenizer", None) is None or getattr(processor, "image_processor", None) is None:
        raise LaunchFailed(
            f"a vision model needs an image processor and a tokenizer in its folder; mlx-vlm found only "
            f"{type(processor).__name__}"
        )
    return model, processor


def vision_inputs(processor: Any, prompt: str, images: list[Any]) -> VisionInputs:
    """The processor's inputs for ``prompt`` and its ``images`` (PIL images, in conversation order). A template
    that did not write one placeholder per image makes the processor refuse: a 400."""
    import numpy as np

    # no text options: the processor mlx-vlm loads hands every keyword it does not know to the image processor,
    # which refuses them (add_special_tokens included)
    try:
        out = processor(text=[prompt], images=images or None, return_tensors="np")
    except (ValueError, TypeError) as exc:
        raise InvalidRequest(f"the model could not place the images in its prompt: {exc}", param="messages") from exc
    arrays = {key: np.asarray(value) for key, value in out.items() if value is not None}
    ids = [int(i) for i in arrays.pop("input_ids")[0]]
    bos = getattr(processor.tokenizer, "bos_token_id", None)
    if bos is not None and ids[:2] == [bos, bos]:
        # the tokenizer added a BOS before the one the template wrote: the prompt starts once, as on text requests
        ids = ids[1:]
        if "attention_mask" in arrays:
            arrays["attention_mask"] = arrays["attention_mask"][:, 1:]
    return VisionInputs(ids, arrays)


def vision_steps(model: Any, seq_ids: list[int], media: VisionInputs | None, **options: Any) -> Any:
    """mlx-vlm's token generator for one prompt: ``(token, logprobs)`` pairs, the image features merged into the
    prompt's embeddings at the prefill. ``options``: ``max_tokens``, ``sampler``, ``logits_processors``,
    ``prefill_step_size``."""
    import mlx.core as mx
    from mlx_vlm.generate.ar import generate_step

    extra = {key: mx.array(value) for key, value in (media.arrays if media is not None else {}).items()}
    pixel_values = extra.pop("pixel_values", None)
    mask = extra.pop("attention_mask", None)
    return generate_step(mx.array([seq_ids]), model, pixel_values, mask, temperature=0.0, **options, **extra)
