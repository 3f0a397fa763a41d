"""Launch options of the MLX engine (mlx-lm running in the model process).

Users pass these as extra launch kwargs (``xinference launch ... -en MLX --max_num_seqs 8``); unknown names are a
400. ``None`` means "size it for this worker" (:meth:`MLXConfig.resolve`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_CPU_SEQS", "DEFAULT_METAL_SEQS", "MLXConfig", "ResolvedMLXConfig"]

#: Sequences decoded together. On a CPU a decode step's cost grows with the rows, so a few rows give most of the
#: aggregate gain; Apple GPUs take many rows for about the price of one.
DEFAULT_CPU_SEQS = 4
DEFAULT_METAL_SEQS = 16


class MLXConfig(BaseModel):
    """What a user may set at launch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="sequences decoded together (mlx-lm's batch generator); 1 decodes one request at a time",
    )
    max_model_len: int | None = Field(
        default=None, ge=16, le=1 << 21, description="prompt + completion tokens (default: the model's context)"
    )
    prefill_step_size: int = Field(
        default=512, ge=16, le=1 << 16, description="prompt tokens per forward pass while prefilling"
    )
    prompt_cache_size: int = Field(
        default=10,
        ge=0,
        le=1024,
        description="KV caches of finished requests kept for reuse: a new prompt that starts like one of them "
        "(the system prompt, the conversation so far) prefills only the rest; 0 turns it off (batch mode only)",
    )
    prompt_cache_mib: int = Field(
        default=1024,
        ge=0,
        le=1 << 24,
        description="memory those KV caches may hold at the most (least recently used ones go first)",
    )
    n_threads: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="OpenBLAS threads on Linux (default: every core; measured on 2 busy cores, SmolLM2-135M "
        "decoded 11 tok/s with 2 threads and 7 with 1)",
    )
    trust_remote_code: bool = False
    max_images_per_prompt: int = Field(
        default=16, ge=0, le=1024, description="images one chat request may carry (vision models, mlx-vlm)"
    )

    def resolve(self, *, cpu_count: int, metal: bool, context_length: int | None) -> ResolvedMLXConfig:
        return ResolvedMLXConfig(
            **self.model_dump(exclude={"max_num_seqs", "max_model_len", "n_threads"}),
            max_num_seqs=self.max_num_seqs or (DEFAULT_METAL_SEQS if metal else DEFAULT_CPU_SEQS),
            max_model_len=self.max_model_len or context_length or 4096,
            n_threads=self.n_threads or cpu_count,
        )


class ResolvedMLXConfig(MLXConfig):
    """The options actually used: every sizing field is set."""

    max_num_seqs: int
    max_model_len: int
    n_threads: int
