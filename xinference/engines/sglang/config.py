"""Launch options of the SGLang engine and their translation into ``sglang.launch_server`` arguments.

SGLang runs as a managed server process (:mod:`xinference.engines.managed.engine`), so every option here ends up as a
command-line flag of SGLang's server. Users pass them as extra launch kwargs; unknown names are a 400.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xinference.engines.managed.cli_args import MediaLimits, json_args, option_args

__all__ = ["SGLangConfig"]

Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
KvCacheDtype = Literal["auto", "fp8_e4m3", "fp8_e5m2"]


class SGLangConfig(BaseModel):
    """What a user may set at launch; ``None`` leaves SGLang's own default (``tp_size``: one shard per GPU given
    to the replica)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp_size: int | None = Field(default=None, ge=1, le=64, description="tensor parallel shards")
    dp_size: int | None = Field(default=None, ge=1, le=64, description="data parallel copies")
    mem_fraction_static: float | None = Field(default=None, gt=0.0, le=1.0, description="weights + KV share")
    context_length: int | None = Field(default=None, ge=16, description="context tokens; default: the model's")
    max_running_requests: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=16)
    chunked_prefill_size: int | None = Field(default=None, ge=-1)
    dtype: Dtype = "auto"
    quantization: str | None = None
    kv_cache_dtype: KvCacheDtype = "auto"
    disable_radix_cache: bool = False
    disable_cuda_graph: bool = False
    trust_remote_code: bool = False
    random_seed: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    limit_mm_data_per_request: MediaLimits | None = Field(
        default=None, description='vision models: items per request, e.g. {"image": 4}; default: SGLang\'s (no limit)'
    )
    start_timeout_s: float = Field(default=900.0, gt=0, description="how long the launch waits for the server")

    def to_cli_args(
        self, *, model_path: str, served_model_name: str, host: str, port: int, gpu_count: int = 1
    ) -> list[str]:
        """The ``python -m sglang.launch_server`` command line (after the module name) for these options."""
        args = [
            "--model-path",
            model_path,
            "--served-model-name",
            served_model_name,
            "--host",
            host,
            "--port",
            str(port),
            "--tp-size",
            str(self.tp_size or max(1, gpu_count)),
        ]
        return (
            args
            + option_args(
                self,
                valued=(
                    "dp_size",
                    "mem_fraction_static",
                    "context_length",
                    "max_running_requests",
                    "max_total_tokens",
                    "chunked_prefill_size",
                    "quantization",
                    "random_seed",
                    "reasoning_parser",
                    "tool_call_parser",
                ),
                unless_auto=("dtype", "kv_cache_dtype"),
                switches=("disable_radix_cache", "disable_cuda_graph", "trust_remote_code"),
            )
            + json_args(self, ("limit_mm_data_per_request",))
        )
