"""Launch options of the vLLM engine and their translation into the arguments of vLLM's OpenAI server.

vLLM runs as a managed server process (:mod:`xinference.engines.managed.engine`), so every option here ends up as a
command-line flag of that server (``cpu_kvcache_space_gib`` as ``--kv-cache-memory-bytes``, in bytes, the form the
platform's own sizing on a CPU takes too). Users pass them as
extra launch kwargs (``--max_model_len 8192``); unknown names are a 400.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from xinference.engines.managed.cli_args import flag, option_args
from xinference.model.draft import DraftAttachment

__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DRAFT_TOKENS",
    "MAX_ITEMS_PER_PROMPT",
    "RUNNER_SINCE",
    "ResolvedVLLMConfig",
    "VLLMConfig",
    "pooling_args",
]

#: Tokens a draft model proposes per step when the platform attaches one (``enable_mtp``); vLLM's docs use 3-5.
DRAFT_TOKENS = 4
#: The share of each GPU vLLM reserves when the launch does not say (on a CPU the platform sizes the KV cache)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

#: The first vLLM whose server takes ``--runner`` / ``--convert`` (0.10 replaced ``--task embed`` and
#: ``--task score`` with them; 0.32, the CPU build measured here, no longer knows ``--task``).
RUNNER_SINCE = (0, 10)


def pooling_args(model_type: str, version: tuple[int, ...] | None) -> list[str]:
    """vLLM's server arguments that make it serve a ``model_type`` model: none for an LLM; for an embedding model
    the pooling runner with the ``embed`` conversion (a generative model, Qwen3-Embedding say, pooled into one
    vector; an encoder such as BERT is one already); for a reranker the pooling runner, whose automatic conversion
    keeps a ``…ForSequenceClassification`` cross-encoder's own head (scored through ``/v1/rerank``). ``version``:
    the installed vLLM's, None when unknown (taken as current)."""
    if model_type not in ("embedding", "rerank"):
        return []
    if version is not None and version < RUNNER_SINCE:
        return ["--task", "embed" if model_type == "embedding" else "score"]
    if model_type == "embedding":
        return ["--runner", "pooling", "--convert", "embed"]
    return ["--runner", "pooling"]


Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]
#: The input kinds vLLM counts per prompt (its ``--limit-mm-per-prompt`` keys)
Modality = Literal["image", "video", "audio"]
#: Most items of one kind in one prompt a launch may allow (vLLM's own default is 999; each allowed item sizes the
#: encoder's cache and the memory profile vLLM runs at start)
MAX_ITEMS_PER_PROMPT = 64
ItemCount = Annotated[int, Field(strict=True, ge=0, le=MAX_ITEMS_PER_PROMPT)]


class VLLMConfig(BaseModel):
    """What a user may set at launch; ``None`` leaves vLLM's own default (``tensor_parallel_size``: one shard per
    GPU given to the replica). On a CPU, ``dtype`` ``auto`` means bfloat16 and ``enforce_eager`` defaults to true:
    measured, that starts fastest (25-42 s for a 135M model instead of ~85 s compiled)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    pipeline_parallel_size: int | None = Field(default=None, ge=1, le=64)
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="share of each GPU's memory vLLM reserves (0.9); on a CPU, of the "
        "NUMA node's memory, used only when given",
    )
    max_model_len: int | None = Field(default=None, ge=16, description="context tokens; default: the model's")
    max_num_seqs: int | None = Field(default=None, ge=1, description="concurrent sequences per step")
    max_num_batched_tokens: int | None = Field(default=None, ge=16)
    dtype: Dtype = "auto"
    quantization: str | None = Field(default=None, description="awq, gptq, fp8, ...; default: from the weights")
    kv_cache_dtype: KvCacheDtype = "auto"
    enforce_eager: bool | None = Field(default=None, description="default: true on CPU, false on GPU")
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    trust_remote_code: bool = False
    swap_space: float | None = Field(default=None, ge=0, description="CPU swap space per GPU, GiB")
    seed: int | None = None
    reasoning_parser: str | None = Field(default=None, description="default: from the model family's format")
    tool_call_parser: str | None = Field(default=None, description="default: from the model family's format")
    enable_auto_tool_choice: bool | None = Field(default=None, description="default: on when a tool parser is set")
    cpu_kvcache_space_gib: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="KV cache size on a CPU, whole GiB; default: sized by the platform from the worker's free memory",
    )
    speculative_config: dict[str, Any] | None = Field(
        default=None,
        description='vLLM\'s speculative decoding, e.g. {"method": "ngram", "num_speculative_tokens":'
        ' 3, "prompt_lookup_max": 4} or {"model": "<draft>", "num_speculative_tokens": 3}',
    )
    # vision-language models
    limit_mm_per_prompt: dict[Modality, ItemCount] | None = Field(
        default=None,
        description='most images (videos, audio clips) one prompt may carry, e.g. {"image": 4}; 0 turns that input '
        "off; default: vLLM's",
    )
    mm_processor_kwargs: dict[str, Any] | None = Field(
        default=None,
        description="options of the model's multimodal processor, e.g. Qwen2.5-VL's "
        '{"max_pixels": 1003520} (fewer image tokens per picture)',
    )
    start_timeout_s: float = Field(default=900.0, gt=0, description="how long the launch waits for the server")
    #: a draft model for speculative decoding; set by the platform from ``enable_mtp`` / ``draft_model_path``
    #: (never by hand). An explicit ``speculative_config`` wins over it.
    draft: SkipJsonSchema[DraftAttachment | None] = None

    @field_validator("limit_mm_per_prompt", "mm_processor_kwargs", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """A JSON object given as text, as the CLI passes it (``--limit_mm_per_prompt '{"image": 2}'``)."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f'expected a JSON object, e.g. {{"image": 2}}: {exc}') from exc
        return value

    @field_validator("speculative_config")
    @classmethod
    def _speculative(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not ({"method", "model"} & set(value)):
            raise ValueError('needs "method" (e.g. "ngram") or "model" (a draft model)')
        return value

    def to_cli_args(
        self,
        *,
        model_path: str,
        served_model_name: str,
        host: str,
        port: int,
        gpu_count: int = 1,
        cpu: bool = False,
        kv_cache_memory_bytes: int | None = None,
    ) -> list[str]:
        """vLLM's server arguments (after ``python -m vllm.entrypoints.openai.api_server``) for these options.
        ``kv_cache_memory_bytes``: the KV cache's size (the platform's sizing on a CPU), which makes vLLM ignore
        ``gpu_memory_utilization``; on a CPU the fraction is passed only when the user gave it."""
        args = [
            "--model",
            model_path,
            "--served-model-name",
            served_model_name,
            "--host",
            host,
            "--port",
            str(port),
            "--tensor-parallel-size",
            str(self.tensor_parallel_size or max(1, gpu_count)),
        ]
        utilization = self.gpu_memory_utilization
        if utilization is None and not cpu:
            utilization = DEFAULT_GPU_MEMORY_UTILIZATION
        if utilization is not None:
            args += ["--gpu-memory-utilization", f"{utilization:g}"]
        if kv_cache_memory_bytes is not None:
            args += ["--kv-cache-memory-bytes", str(kv_cache_memory_bytes)]
        defaults: dict[str, Any] = {}
        if cpu and self.dtype == "auto":
            defaults["dtype"] = "bfloat16"
        enable_tools = self.enable_auto_tool_choice
        if enable_tools is None:
            enable_tools = self.tool_call_parser is not None
        effective = self.model_copy(
            update={
                **defaults,
                "enforce_eager": cpu if self.enforce_eager is None else self.enforce_eager,
                "enable_auto_tool_choice": enable_tools,
            }
        )
        args += option_args(
            effective,
            valued=(
                "pipeline_parallel_size",
                "max_model_len",
                "max_num_seqs",
                "max_num_batched_tokens",
                "quantization",
                "swap_space",
                "seed",
                "reasoning_parser",
                "tool_call_parser",
            ),
            unless_auto=("dtype", "kv_cache_dtype"),
            switches=("enforce_eager", "trust_remote_code", "enable_auto_tool_choice"),
            toggles=("enable_prefix_caching", "enable_chunked_prefill"),
        )
        speculative = self.speculative_config
        if speculative is None and self.draft is not None:
            speculative = {"model": self.draft.path, "num_speculative_tokens": DRAFT_TOKENS}
        if speculative is not None:
            args += ["--speculative-config", json.dumps(speculative, separators=(",", ":"))]
        for name in ("limit_mm_per_prompt", "mm_processor_kwargs"):
            value = getattr(self, name)
            if value is not None:
                args += [flag(name), json.dumps(value, separators=(",", ":"), sort_keys=True)]
        return args

    def gpu_count(self) -> int:
        """GPUs one replica needs: tensor x pipeline parallel shards."""
        return (self.tensor_parallel_size or 1) * (self.pipeline_parallel_size or 1)


class ResolvedVLLMConfig(VLLMConfig):
    """The options a replica was started with (the model's ``engine_config``): the user's, plus what the platform
    decided on a CPU (``max_model_len``, the KV cache in bytes and why, see :mod:`xinference.engines.vllm.cpu_memory`).
    Never parsed from a launch: the extra fields are not launch options."""

    kv_cache_memory_bytes: int | None = None
    cpu_memory: str | None = None
