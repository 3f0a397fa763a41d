"""Launch options of the llama.cpp engine, and how their defaults are sized to the worker.

Users pass these as extra launch kwargs (``xinference launch ... --n_ctx 4096``); unknown names are a 400.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_CPU_SLOTS", "DEFAULT_GPU_SLOTS", "MAX_DEFAULT_CTX", "LlamaCppConfig", "ResolvedLlamaCppConfig"]

#: Concurrent decoding slots on CPU. Measured on 2 cores with SmolLM2-135M: 4 slots give 1.45x the aggregate
#: tokens/s of 1 slot, and with 2 slots (the original Xinference's default) the 3rd and 4th concurrent users wait
#: ~2.3 s for their first token.
DEFAULT_CPU_SLOTS = 4
DEFAULT_GPU_SLOTS = 8
#: Default context when the user does not set ``n_ctx``: the model's own, capped so the KV cache of a small
#: machine stays modest. The KV cache is unified: any one request may use all of it.
MAX_DEFAULT_CTX = 8192

KvCacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


class LlamaCppConfig(BaseModel):
    """What a user may set at launch; ``None`` means "size it for this worker"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_ctx: int | None = Field(default=None, ge=256, le=1 << 21, description="context tokens shared by all slots")
    n_parallel: int | None = Field(default=None, ge=1, le=256, description="concurrent decoding slots")
    n_threads: int | None = Field(default=None, ge=1, le=1024, description="decode threads")
    n_threads_batch: int | None = Field(default=None, ge=1, le=1024, description="prompt-processing threads")
    n_batch: int | None = Field(default=None, ge=1, le=1 << 16)
    n_ubatch: int | None = Field(default=None, ge=1, le=1 << 16)
    n_gpu_layers: int | None = Field(default=None, ge=-1, description="-1: all layers on the GPU")
    kv_unified: bool = True
    flash_attn: Literal["auto", "on", "off"] = "auto"
    cache_type_k: KvCacheType | None = None
    cache_type_v: KvCacheType | None = None
    cache_prompt: bool = True

    def resolve(self, *, cpu_count: int, context_length: int | None, gpu: bool) -> ResolvedLlamaCppConfig:
        """Fill every unset option from the worker's hardware and the model's context length."""
        model_ctx = context_length or 4096
        threads = self.n_threads or max(1, cpu_count)
        return ResolvedLlamaCppConfig(
            **self.model_dump(
                exclude={"n_ctx", "n_parallel", "n_threads", "n_threads_batch", "n_gpu_layers"},
            ),
            n_ctx=self.n_ctx or min(model_ctx, MAX_DEFAULT_CTX),
            n_parallel=self.n_parallel or (DEFAULT_GPU_SLOTS if gpu else DEFAULT_CPU_SLOTS),
            n_threads=threads,
            n_threads_batch=self.n_threads_batch or threads,
            n_gpu_layers=self.n_gpu_layers if self.n_gpu_layers is not None else (-1 if gpu else 0),
        )


class ResolvedLlamaCppConfig(LlamaCppConfig):
    """The options actually used: every sizing field is set."""

    n_ctx: int
    n_parallel: int
    n_threads: int
    n_threads_batch: int
    n_gpu_layers: int
