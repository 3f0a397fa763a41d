"""Xinference's image registration JSON (flat, like its audio JSON) accepted verbatim, and the files a diffusers
repository download takes."""

from __future__ import annotations

from typing import Any

from xinference.model.custom import from_xinference_json
from xinference.model.download import diffusers_files
from xinference.model.spec import ModelFamily

# As Xinference's xinference/model/image/models/FLUX.1-schnell.json writes the entry (its fields, verbatim)
XINFERENCE_FLUX = {
    "version": 2,
    "model_name": "FLUX.1-schnell",
    "model_family": "stable_diffusion",
    "model_ability": ["text2image", "image2image", "inpainting"],
    "default_model_config": {"quantize": True, "quantize_text_encoder": "text_encoder_2", "torch_dtype": "bfloat16"},
    "model_src": {
        "huggingface": {
            "model_id": "black-forest-labs/FLUX.1-schnell",
            "model_revision": "768d12a373ed5cc9ef9a9dea7504dc09fcc14842",
            "gguf_model_id": "city96/FLUX.1-schnell-gguf",
            "gguf_quantizations": ["F16", "Q8_0"],
            "gguf_model_file_name_template": "flux1-schnell-{quantization}.gguf",
        },
        "modelscope": {"model_id": "AI-ModelScope/FLUX.1-schnell", "model_revision": "master"},
    },
    "updated_at": 1769418353,
    "featured": True,
    "virtualenv": {"packages": ['#diffusers_dependencies# ; #engine# == "diffusers"'], "no_build_isolation": True},
}


def _family(data: dict[str, Any]) -> ModelFamily:
    return ModelFamily.model_validate(from_xinference_json({"model_type": "image", **data}, "image"))


def test_a_builtin_entry_of_xinference_becomes_one_diffusers_spec() -> None:
    family = _family({**XINFERENCE_FLUX, "model_name": "my-flux"})
    assert family.model_type == "image" and family.model_ability == ["text2image", "image2image", "inpainting"]
    (spec,) = family.model_specs
    assert spec.model_format == "diffusers" and spec.quantizations == ["none"]
    assert spec.hub_id("huggingface") == "black-forest-labs/FLUX.1-schnell"
    assert spec.hub_id("modelscope") == "AI-ModelScope/FLUX.1-schnell"
    assert spec.model_revision == "768d12a373ed5cc9ef9a9dea7504dc09fcc14842"
    assert family.kept_fields["default_model_config"]["torch_dtype"] == "bfloat16"  # the engine's dtype on CUDA
    assert family.kept_fields["model_family"] == "stable_diffusion"


def test_local_weights_and_a_missing_ability() -> None:
    family = _family({"model_name": "my-sd", "model_uri": "/models/sd", "controlnet": [{"model_name": "canny"}]})
    assert family.model_ability == ["text2image"]
    assert family.model_specs[0].model_uri == "file:///models/sd"
    assert family.kept_fields["controlnet"] == [{"model_name": "canny"}]


def test_a_diffusers_download_takes_each_components_default_weights() -> None:
    names = [
        "model_index.json",
        "README.md",
        "v1-5-pruned.safetensors",
        "v1-5-pruned-emaonly.ckpt",
        "unet/config.json",
        "unet/diffusion_pytorch_model.safetensors",
        "unet/diffusion_pytorch_model.fp16.safetensors",
        "unet/diffusion_pytorch_model.non_ema.bin",
        "unet/diffusion_pytorch_model.bin",
        "vae/config.json",
        "vae/diffusion_pytorch_model.fp16.safetensors",
        "text_encoder/config.json",
        "text_encoder/model-00001-of-00002.safetensors",
        "text_encoder/model-00002-of-00002.safetensors",
        "text_encoder/model.safetensors.index.json",
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "tokenizer/special_tokens_map.json",
        "tokenizer_3/spiece.model",
        "scheduler/scheduler_config.json",
        "safety_checker/pytorch_model.bin",
        "onnx/unet/model.onnx",
        "flax/unet/diffusion_flax_model.msgpack",
    ]
    assert diffusers_files(names) == sorted(
        [
            "model_index.json",
            "unet/config.json",
            "unet/diffusion_pytorch_model.safetensors",
            "vae/config.json",
            "vae/diffusion_pytorch_model.fp16.safetensors",  # the only weights of that folder
            "text_encoder/config.json",
            "text_encoder/model-00001-of-00002.safetensors",
            "text_encoder/model-00002-of-00002.safetensors",
            "text_encoder/model.safetensors.index.json",
            "tokenizer/vocab.json",
            "tokenizer/merges.txt",
            "tokenizer/special_tokens_map.json",
            "tokenizer_3/spiece.model",
            "scheduler/scheduler_config.json",
            "safety_checker/pytorch_model.bin",
        ]
    )
