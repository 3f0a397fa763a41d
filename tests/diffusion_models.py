"""A tiny Stable Diffusion pipeline built at test time from diffusers' and transformers' own classes (random
weights, ~0.5 MB): a UNet2D conditioned on a 2-layer CLIP text encoder, a 2-block VAE (scale factor 2) and a CLIP
tokenizer whose vocabulary is written here (letters only, no hub). Its images mean nothing, but every step runs the
real pipeline code: sizes, batches, seeds, image-to-image and inpainting.

Shared by the engine, API, client and UI tests (with the registration body of a custom image model on it) and by
``benchmark/compare_images.py``.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.conftest import LocalServer

__all__ = ["TINY_SD_ABILITIES", "build_tiny_lora", "build_tiny_sd", "launched_tiny_sd", "tiny_sd_family"]

TINY_SD_ABILITIES = ["text2image", "image2image", "inpainting"]


def _tokenizer(folder: Path) -> Any:
    from transformers import CLIPTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for letter in string.ascii_lowercase:
        vocab[letter] = len(vocab)
    for letter in string.ascii_lowercase:
        vocab[letter + "</w>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return CLIPTokenizer(
        str(folder / "vocab.json"), str(folder / "merges.txt"), pad_token="<|endoftext|>", model_max_length=77
    )


def build_tiny_sd(target: Path, channels: tuple[int, int] = (8, 16)) -> Path:
    """The pipeline saved with ``save_pretrained`` in ``target`` (built once; later calls reuse it), its UNet's two
    blocks ``channels`` wide (``benchmark/compare_images.py`` builds a wider one to time)."""
    if (target / "model_index.json").exists():
        return target
    import torch
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=channels,
        layers_per_block=1,
        sample_size=32,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        norm_num_groups=4,
        attention_head_dim=4,
    )
    vae = AutoencoderKL(
        block_out_channels=[8, 16],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        latent_channels=4,
        norm_num_groups=4,
    )
    tokenizer = _tokenizer(target.parent / f".{target.name}-tokenizer")
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=len(tokenizer),
            max_position_embeddings=77,
        )
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", num_train_timesteps=1000, steps_offset=1
    )
    pipeline = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipeline.save_pretrained(target)
    return target


def tiny_sd_family(name: str, path: Path, **extra: Any) -> dict[str, Any]:
    """The registration body of a custom image model whose diffusers folder is ``path``."""
    return {
        "model_name": name,
        "model_type": "image",
        "model_ability": list(TINY_SD_ABILITIES),
        "model_specs": [
            {
                "model_format": "diffusers",
                "model_size_in_billions": "0_001",
                "quantizations": ["none"],
                "model_uri": f"file://{path}",
            }
        ],
        **extra,
    }


@contextmanager
def launched_tiny_sd(server: LocalServer, name: str, path: Path, **launch: Any) -> Iterator[dict[str, Any]]:
    """The tiny pipeline at ``path`` registered as image model ``name`` and launched with the options ``launch``
    (the launch answer is given); stopped and unregistered on the way out."""
    registered = httpx.post(
        f"{server.api}/model_registrations/image", json={"model": tiny_sd_family(name, path)}, timeout=30
    )
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{server.api}/models", json={"model_name": name, "model_type": "image", **launch}, timeout=180
        )
        assert launched.status_code == 200, launched.text
        answer: dict[str, Any] = launched.json()
        yield answer
    finally:
        httpx.delete(f"{server.api}/models/{name}", timeout=60)
        httpx.delete(f"{server.api}/model_registrations/image/{name}", timeout=30)


def build_tiny_lora(pipeline_path: Path, target: Path) -> Path:
    """LoRA weights for the tiny pipeline's UNet attention (rank 4, seeded random so that they change the images),
    saved as diffusers saves LoRA weights (``pytorch_lora_weights.safetensors`` in ``target``). Needs peft."""
    if (target / "pytorch_lora_weights.safetensors").exists():
        return target
    import torch
    from diffusers import StableDiffusionPipeline
    from diffusers.utils import convert_state_dict_to_diffusers
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    pipeline = StableDiffusionPipeline.from_pretrained(str(pipeline_path))
    pipeline.unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v", "to_out.0"]))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in pipeline.unet.named_parameters():
            if "lora_B" in name:  # peft starts B at zero (no change): make the adapter do something
                parameter.normal_(0.0, 0.5)
    layers = convert_state_dict_to_diffusers(get_peft_model_state_dict(pipeline.unet))
    StableDiffusionPipeline.save_lora_weights(save_directory=str(target), unet_lora_layers=layers)
    return target
