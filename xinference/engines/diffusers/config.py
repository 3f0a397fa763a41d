"""Launch options of the diffusers engine (image generation).

Users pass these as extra launch kwargs (``xinference launch --model-type image -n sd-turbo --torch_dtype float16
--scheduler EulerDiscreteScheduler``); unknown names are a 400.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["SCHEDULERS", "DiffusersConfig", "ResolvedDiffusersConfig"]

#: Schedulers a launch may swap in (diffusers' class names). The pipeline keeps its own when none is named; one that
#: does not fit the pipeline (a flow-matching model takes flow-matching schedulers only) fails the launch, listing
#: the ones that do.
SCHEDULERS = (
    "DDIMScheduler",
    "DDPMScheduler",
    "PNDMScheduler",
    "LMSDiscreteScheduler",
    "EulerDiscreteScheduler",
    "EulerAncestralDiscreteScheduler",
    "HeunDiscreteScheduler",
    "DPMSolverMultistepScheduler",
    "DPMSolverSinglestepScheduler",
    "DPMSolverSDEScheduler",
    "KDPM2DiscreteScheduler",
    "KDPM2AncestralDiscreteScheduler",
    "UniPCMultistepScheduler",
    "DEISMultistepScheduler",
    "LCMScheduler",
    "TCDScheduler",
    "FlowMatchEulerDiscreteScheduler",
    "FlowMatchHeunDiscreteScheduler",
)


class DiffusersConfig(BaseModel):
    """What a launch may set; every field has a default that fits the worker."""

    model_config = ConfigDict(extra="forbid")

    torch_dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto",
        description="weights' type; auto: float32 on a CPU, on CUDA the family's own choice (bfloat16 for FLUX, SD3 "
        "and Qwen-Image) or float16",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="auto: cuda when the worker has it")
    scheduler: str | None = Field(default=None, description="a diffusers scheduler class name; default: the model's")
    num_inference_steps: int | None = Field(
        default=None, ge=1, le=200, description="denoising steps of a request that names none; default: the pipeline's"
    )
    guidance_scale: float | None = Field(
        default=None, ge=0.0, le=50.0, description="guidance of a request that names none; default: the pipeline's"
    )
    lora_path: str | None = Field(
        default=None, description="absolute path on the worker of LoRA weights (a .safetensors file or a folder)"
    )
    lora_scale: float = Field(default=1.0, ge=0.0, le=4.0, description="how strongly the LoRA applies")
    cpu_offload: bool = Field(
        default=False, description="CUDA: keep each component in RAM until it runs (less VRAM, slower)"
    )
    attention_slicing: bool = Field(default=False, description="compute attention in slices (less memory, slower)")
    threads: int | None = Field(default=None, ge=1, le=256, description="torch CPU threads; default: usable cores")

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, value: str | None) -> str | None:
        if value is not None and value not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {value[:60]!r}; choose one of: {', '.join(SCHEDULERS)}")
        return value

    @field_validator("lora_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and ("\0" in value or not os.path.isabs(value)):
            raise ValueError("lora_path must be an absolute path on the worker")
        return value

    def resolve(self, gpu: bool, family_dtype: str | None) -> ResolvedDiffusersConfig:
        """The settings the pipeline loads with on a worker with a CUDA GPU or not (``family_dtype``: the dtype
        the catalog gives the model, used on CUDA when the launch says auto)."""
        device = ("cuda" if gpu else "cpu") if self.device == "auto" else self.device
        dtype: str = self.torch_dtype
        if dtype == "auto":
            dtype = "float32" if device == "cpu" else (family_dtype or "float16")
        return ResolvedDiffusersConfig(
            device=device,
            torch_dtype=dtype,
            scheduler=self.scheduler,
            num_inference_steps=self.num_inference_steps,
            guidance_scale=self.guidance_scale,
            lora_path=self.lora_path,
            lora_scale=self.lora_scale,
            cpu_offload=self.cpu_offload and device == "cuda",
            attention_slicing=self.attention_slicing,
        )


class ResolvedDiffusersConfig(BaseModel):
    """The launch options with every default settled for this worker (shown by ``describe``)."""

    model_config = ConfigDict(frozen=True)

    device: str
    torch_dtype: str
    scheduler: str | None
    num_inference_steps: int | None
    guidance_scale: float | None
    lora_path: str | None
    lora_scale: float
    cpu_offload: bool
    attention_slicing: bool
