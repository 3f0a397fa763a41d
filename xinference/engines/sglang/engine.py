"""SGLang: pytorch, AWQ, GPTQ and FP8 weights on CUDA GPUs under Linux, with continuous batching and a radix cache.

SGLang runs as its own OpenAI server (``python -m sglang.launch_server``) in the engine's environment
(``xinference engine install SGLang``), started, proxied, watched and stopped by
:mod:`xinference.engines.managed.engine`; this module only says what to install, where it fits and how its options
become arguments. It has no CPU build on PyPI (its wheel needs CUDA torch, flashinfer and CUDA kernels), so it is
GPU only. Tool calls and reasoning go through SGLang's own parsers, chosen from the model family's declared
formats; forced tool calls are built on structured output like vLLM's. ``/v1/messages/count_tokens`` renders the
prompt in the model process (:mod:`xinference.engines.sglang.prompt`) and counts it with the server's tokenizer.
Images reach the server as the API left them, ``image_url`` parts holding ``data:`` URIs, which SGLang's OpenAI
chat route reads (its template step turns each into the model's image placeholder and hands the pixels to the
model's processor); ``limit_mm_data_per_request`` bounds how many one request may carry.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from xinference.engines.base import Verdict
from xinference.engines.envs import EnvRecipe
from xinference.engines.libraries import SGLANG
from xinference.engines.managed.engine import (
    ManagedServerEngine,
    cuda_linux_verdict,
    reasoning_style,
    tool_format_name,
    visible_gpu_count,
)
from xinference.engines.sglang.config import SGLangConfig
from xinference.engines.sglang.prompt import ChatPrompt
from xinference.model.images import count_images

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["NO_CPU_BUILD", "REASONING_PARSERS", "TOOL_PARSERS", "SGLangEngine"]

NO_CPU_BUILD = "SGLang has no CPU build; it needs an NVIDIA GPU"

#: A family's tool-call format (its canonical name, model/parsers/registry.py) -> SGLang's ``--tool-call-parser``.
TOOL_PARSERS: dict[str, str] = {
    "hermes": "qwen25",
    "llama3_json": "llama3",
    "mistral": "mistral",
    "qwen3_coder": "qwen3_coder",
    "glm45": "glm",
    "deepseek_v3": "deepseekv3",
    "deepseek_v31": "deepseekv31",
    "deepseek_v32": "deepseekv32",
    "kimi_k2": "kimi_k2",
    "pythonic": "pythonic",
    "harmony": "gpt-oss",
}
#: A family's reasoning style (see ``managed.reasoning_style``) -> SGLang's ``--reasoning-parser`` name.
REASONING_PARSERS: dict[str, str] = {"think": "deepseek-r1", "qwen3": "qwen3", "kimi": "kimi", "harmony": "gpt-oss"}
#: fields of a request that change what is generated, not the prompt: dropped when a chat of one token counts it
_NOT_FOR_COUNTING = frozenset({"stream", "stream_options", "n", "logprobs", "top_logprobs", "max_tokens", "stop"})


class SGLangEngine(ManagedServerEngine):
    """LLMs on NVIDIA GPUs through SGLang's OpenAI server (managed subprocess)."""

    name: ClassVar[str] = "SGLang"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch", "awq", "gptq", "fp8"})
    continuous_batching: ClassVar[bool] = True
    reads_images: ClassVar[bool] = True  # image_url parts pass to SGLang's OpenAI route, its processor reads them
    config_class = SGLangConfig
    context_option: ClassVar[str | None] = "context_length"
    module, distribution, min_version = SGLANG.module, SGLANG.distribution, SGLANG.minimum
    metric_names: ClassVar[dict[str, str]] = {
        "requests_running": "sglang:num_running_reqs",
        "requests_waiting": "sglang:num_queue_reqs",
        "prompt_tokens": "sglang:prompt_tokens_total",
        "generation_tokens": "sglang:generation_tokens_total",
        "token_usage": "sglang:token_usage",  # the KV cache's share in use (0-1)
    }
    averaged_metrics: ClassVar[frozenset[str]] = frozenset({"sglang:token_usage"})

    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        if hardware.os == "linux" and hardware.cuda_available:
            return EnvRecipe(("sglang[all]",))
        return None

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        if hardware.os == "linux" and not hardware.cuda_available:
            return Verdict.reject(NO_CPU_BUILD)
        where = cuda_linux_verdict(cls.name, hardware)
        return where if not where else super().match(family, spec, hardware)

    @classmethod
    def gpus_needed(cls, config: BaseModel) -> int | None:
        assert isinstance(config, SGLangConfig)
        if config.tp_size is None and config.dp_size is None:
            return None
        return (config.tp_size or 1) * (config.dp_size or 1)

    def tool_parser(self) -> str | None:
        assert isinstance(self.config, SGLangConfig)
        if self.config.tool_call_parser is not None:
            return self.config.tool_call_parser
        declared = tool_format_name(self.family)
        return TOOL_PARSERS.get(declared) if declared else None

    def reasoning_parser(self) -> str | None:
        assert isinstance(self.config, SGLangConfig)
        if self.config.reasoning_parser is not None:
            return self.config.reasoning_parser
        style = reasoning_style(self.family)
        return REASONING_PARSERS.get(style) if style else None

    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        assert isinstance(self.config, SGLangConfig)
        config = self.config.model_copy(
            update={"tool_call_parser": self.tool_parser(), "reasoning_parser": self.reasoning_parser()}
        )
        args = [
            python,
            "-m",
            "sglang.launch_server",
            *config.to_cli_args(
                model_path=self.model_path,
                served_model_name=self.model_uid,
                host="127.0.0.1",
                port=port,
                gpu_count=visible_gpu_count(self.hardware),
            ),
            "--api-key",
            api_key,
            "--enable-metrics",
        ]
        if self.family.chat_template:
            args += ["--chat-template", self.temp_file("chat_template.jinja", self.family.chat_template)]
        return args

    def server_env(self) -> dict[str, str]:
        return {"DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}

    _prompt: ChatPrompt | None = None

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt tokens a chat call with ``request`` would report: rendered here as SGLang renders it
        (:mod:`xinference.engines.sglang.prompt`; its ``/tokenize`` takes text only), counted by the server's own
        tokenizer. A request with images is counted by the server itself: how many tokens an image becomes is
        decided by the model's processor inside SGLang (its size, tiles, merges), so the request is sent as a
        chat of one token and its ``usage.prompt_tokens`` is the count (the price: a prefill on the GPU)."""
        if count_images(request.get("messages") or ()):
            counting = {key: value for key, value in request.items() if key not in _NOT_FOR_COUNTING}
            reply = await self.chat({**counting, "max_tokens": 1, "temperature": 0.0})
            return int(reply["usage"]["prompt_tokens"])
        if self._prompt is None:
            self._prompt = ChatPrompt(self.family, self.model_path, self.model_uid)
        text = await asyncio.to_thread(self._prompt.render, request)
        reply = await self._post("/tokenize", {"model": self.model_uid, "prompt": text, "add_special_tokens": False})
        return int(reply["count"])
