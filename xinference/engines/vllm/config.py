"""Launch options of the vLLM engine and their translation into ``vllm serve`` arguments.

vLLM runs as a managed subprocess speaking its own OpenAI protocol, so every option here ends up as a command-line
flag of vLLM's server. Users pass them as extra launch kwargs (``--max_model_len 8192``); unknown names are a 400.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xinference.engines.cli_args import option_args

__all__ = ["VLLMConfig"]

Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]


class VLLMConfig(BaseModel):
    """What a user may set at launch; ``None`` leaves vLLM's own default (``tensor_parallel_size``: one shard per
    GPU given to the replica)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    pipeline_parallel_size: int | None = Field(default=None, ge=1, le=64)
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)
    max_model_len: int | None = Field(default=None, ge=16, description="context tokens; default: the model's")
    max_num_seqs: int | None = Field(default=None, ge=1, description="concurrent sequences per step")
    max_num_batched_tokens: int | None = Field(default=None, ge=16)
    dtype: Dtype = "auto"
    quantization: str | None = Field(default=None, description="awq, gptq, fp8, ...; default: from the weights")
    kv_cache_dtype: KvCacheDtype = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    trust_remote_code: bool = False
    swap_space: float | None = Field(default=None, ge=0, description="CPU swap space per GPU, GiB")
    seed: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False

    def to_cli_args(
        self, *, model_path: str, served_model_name: str, host: str, port: int, gpu_count: int = 1
    ) -> list[str]:
        """The ``vllm serve`` command line (after the executable) for these options."""
        args = [
            model_path,
            "--served-model-name", served_model_name,
            "--host", host,
            "--port", str(port),
            "--tensor-parallel-size", str(self.tensor_parallel_size or max(1, gpu_count)),
            "--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}",
        ]
        return args + option_args(
            self,
            valued=("pipeline_parallel_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "quantization",
                    "swap_space", "seed", "reasoning_parser", "tool_call_parser"),
            unless_auto=("dtype", "kv_cache_dtype"),
            switches=("enforce_eager", "trust_remote_code", "enable_auto_tool_choice"),
            toggles=("enable_prefix_caching", "enable_chunked_prefill"),
        )
