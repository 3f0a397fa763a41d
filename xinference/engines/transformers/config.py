"""Launch options of the Transformers LLM engine.

Users pass these as extra launch kwargs (``xinference launch ... --max_num_seqs 8``); unknown names are a 400.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xinference.engines.sentence_transformers.config import default_threads

__all__ = [
    "DEFAULT_CPU_PREFILL_TOKENS",
    "DEFAULT_CPU_SEQS",
    "DEFAULT_GPU_PREFILL_TOKENS",
    "DEFAULT_GPU_SEQS",
    "ResolvedTransformersConfig",
    "TransformersConfig",
]

#: Sequences decoded together. On CPU a decode step's cost grows with the batch, so a few rows already give most
#: of the aggregate gain; on a GPU a step costs about the same for many rows.
DEFAULT_CPU_SEQS = 4
DEFAULT_GPU_SEQS = 16
#: Padded prompt tokens per prefill forward pass: a longer prefill goes a chunk per turn, between decode steps, so
#: the running sequences wait for one chunk at most. A CPU forward pass's cost grows with its tokens (512 take
#: ~0.5 s for a 135M model on two cores); a GPU takes thousands in about the time of one.
DEFAULT_CPU_PREFILL_TOKENS = 512
DEFAULT_GPU_PREFILL_TOKENS = 8192


class TransformersConfig(BaseModel):
    """What a user may set at launch; ``None`` means "size it for this worker"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_num_seqs: int | None = Field(default=None, ge=1, le=1024, description="sequences in the running batch")
    max_model_len: int | None = Field(
        default=None, ge=16, le=1 << 21, description="prompt + completion tokens (default: the model's context)"
    )
    prefill_step_size: int | None = Field(
        default=None, ge=16, le=1 << 20, description="padded prompt tokens per prefill forward pass"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        default=None, description="weights dtype (default: float32 on CPU, the checkpoint's on GPU)"
    )
    n_threads: int | None = Field(default=None, ge=1, le=1024, description="torch CPU threads")
    device: str | None = Field(default=None, description="torch device (default: cuda when available, else cpu)")
    trust_remote_code: bool = False
    max_images_per_prompt: int = Field(
        default=16, ge=0, le=1024, description="images one chat request may carry (vision models)"
    )

    def resolve(self, *, cpu_count: int, gpu: bool, context_length: int | None) -> ResolvedTransformersConfig:
        return ResolvedTransformersConfig(
            **self.model_dump(
                exclude={"max_num_seqs", "max_model_len", "prefill_step_size", "dtype", "n_threads", "device"}
            ),
            max_num_seqs=self.max_num_seqs or (DEFAULT_GPU_SEQS if gpu else DEFAULT_CPU_SEQS),
            prefill_step_size=self.prefill_step_size
            or (DEFAULT_GPU_PREFILL_TOKENS if gpu else DEFAULT_CPU_PREFILL_TOKENS),
            max_model_len=self.max_model_len or context_length or 4096,
            dtype=self.dtype or ("auto" if gpu else "float32"),
            n_threads=self.n_threads or default_threads(cpu_count),
            device=self.device or ("cuda" if gpu else "cpu"),
        )


class ResolvedTransformersConfig(TransformersConfig):
    """The options actually used: every sizing field is set."""

    max_num_seqs: int
    max_model_len: int
    prefill_step_size: int
    dtype: Literal["auto", "float32", "bfloat16", "float16"]
    n_threads: int
    device: str
