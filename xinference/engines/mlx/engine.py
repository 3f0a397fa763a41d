"""MLX: LLMs through mlx-lm, inside the model process, on Apple silicon (Metal) and on Linux CPUs (``mlx[cpu]``).

Where it runs and how it is installed:

- mlx and mlx-lm live in an environment of their own (:meth:`MLXEngine.env_recipe`: ``mlx`` + ``mlx-lm`` on
  Apple silicon, ``mlx[cpu]`` + ``mlx-lm`` on Linux; ``xinference engine install MLX``). It is an *overlay* env:
  the worker starts the model process with the env's Python, which imports xinference and xoscar from the main
  environment and mlx from the env, so the engine runs in-process like the Transformers engine (no server to
  manage, a cancel reaches the decode loop directly).
- Weights: mlx-format folders (``mlx-community/...``) and Hugging Face safetensors folders (the pytorch format);
  mlx-lm loads both. Configs written by transformers 5 need their rope settings lifted (:mod:`.runtime`).
- On Linux the system's OpenBLAS is preloaded when installed (Debian/Ubuntu: ``apt-get install
  libopenblas0-pthread``): it is about twice as fast as the reference BLAS the wheel ships (:mod:`.runtime`).

Vision-language models (a family with the ``vision`` ability) load with mlx-vlm instead of mlx-lm and decode one
request at a time, their images merged into the prompt at the prefill and counted in its tokens (:mod:`.vision`).

Preference (the matcher takes the first engine of :mod:`xinference.engines.registry` that accepts a model): MLX
comes after llama.cpp and Transformers. On Linux CPUs it is a fallback, accepted only once its env is installed:
measured on 2 cores with SmolLM2-135M, Transformers decodes ~21 tok/s and MLX ~11-15 tok/s, and a GGUF through
llama.cpp is faster than both. On a Mac, models with an mlx spec but no GGUF one go to MLX, and a launch can name
it (``-en MLX``) for pytorch weights when Transformers is installed too.

Requests are handled the same way as by the Transformers engine, with the same code
(:class:`~xinference.engines.continuous.adapter.BatchingEngine`): the fields are validated into
sampling parameters, a grammar and a number of choices by :mod:`xinference.engines.continuous.requests`
(``response_format`` json_object/json_schema and forced tool calls become a grammar,
:mod:`xinference.engines.grammar`), and responses and chunks are shaped by
:mod:`xinference.engines.continuous.outputs`, with tool calls and reasoning parsed out by
:mod:`xinference.model.parsers`. What differs is below that: the chat template (the family JSON's, else the
tokenizer's: :mod:`xinference.model.chat_template`) is rendered by the platform's sandboxed, bounded renderer
(:mod:`xinference.model.prompt_render`; tools described in a system message when the template ignores them),
tokens come from :mod:`.scheduler` (continuous batching with mlx-lm's batch generator) and are picked by
:mod:`.sampling` (the grammar is a logits processor there).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any, ClassVar

from xinference.engines.base import Verdict
from xinference.engines.continuous.adapter import BatchingEngine
from xinference.engines.continuous.loop import Sequence as BaseSequence
from xinference.engines.continuous.requests import RequestPlan, SamplingParams, template_kwargs
from xinference.engines.envs import EnvRecipe
from xinference.engines.libraries import MIN_MLX_LM
from xinference.engines.mlx.config import MLXConfig, ResolvedMLXConfig
from xinference.engines.mlx.runtime import find_openblas, load_model, preload_openblas
from xinference.engines.mlx.sampling import GrammarMask, make_processors, make_sampler
from xinference.engines.mlx.scheduler import Scheduler, Sequence
from xinference.engines.mlx.vision import VisionInputs, load_vision_model, vision_inputs
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.chat_template import find_chat_template
from xinference.model.images import image_parts, load_images
from xinference.model.parsers.tool_prompt import template_renders_tools, with_tools
from xinference.model.prompt_render import RenderLimits, render, special_tokens_of

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["MIN_MLX_LM", "MLX_VLM", "MLXEngine"]

logger = logging.getLogger(__name__)

#: ``generate_step`` with sampler and logits processors, and ``load(model_config=...)``.
#: grammar-constrained decoding (:mod:`xinference.engines.grammar`), as pinned by the transformers extra
_LLGUIDANCE = "llguidance>=1.0"
#: vision-language models (:mod:`.vision`); pinned: its loaders and ``generate_step`` change between releases, and
#: this is the release measured with mlx 0.32 and Transformers 5.24
MLX_VLM = "mlx-vlm==0.7.10"


def _logits_width(model: Any, tokenizer: Any) -> int:
    """The number of logits the model produces per token (the grammar's bitmask covers exactly these)."""
    args = getattr(model, "args", None)
    config = getattr(model, "config", None)  # mlx-vlm's models
    for source in (args, getattr(args, "text_config", None), getattr(config, "text_config", None)):
        width = getattr(source, "vocab_size", None) if source is not None else None
        if isinstance(width, int) and width > 0:
            return width
        if isinstance(source, dict) and isinstance(source.get("vocab_size"), int):
            return int(source["vocab_size"])
    return len(tokenizer)


class MLXEngine(BatchingEngine):
    """LLMs through mlx-lm in the model process, with continuous batching (the request side is
    :class:`~xinference.engines.continuous.adapter.BatchingEngine`'s)."""

    name: ClassVar[str] = "MLX"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"mlx", "pytorch"})
    continuous_batching: ClassVar[bool] = True
    config_class = MLXConfig
    context_option: ClassVar[str | None] = "max_model_len"
    reads_images: ClassVar[bool] = True  # vision families load with mlx-vlm (:mod:`.vision`)

    resolved: ResolvedMLXConfig
    _template: str | None = None
    #: a vision model's processor (mlx-vlm's load), None for a text model
    _processor: Any = None
    #: the BLAS mlx uses in this process: a path to OpenBLAS, or "mlx" (the wheel's own)
    blas: str = "mlx"

    # -- environment and fit -----------------------------------------------------------------------------------
    @classmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        """Apple silicon (Metal), or Linux on x86_64/arm64 (the ``mlx[cpu]`` wheels)."""
        if hardware.is_apple_silicon or (hardware.os == "linux" and hardware.arch in ("x86_64", "arm64")):
            return Verdict.ok()
        return Verdict.reject(
            f"MLX runs on macOS with Apple silicon or on Linux CPUs; this worker is {hardware.os} {hardware.arch}"
        )

    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        """mlx (Metal) or mlx[cpu] (Linux), mlx-lm, llguidance for structured output (pip skips it when the
        main environment, which the overlay env sees, already has it), and mlx-vlm for vision models."""
        if hardware.is_apple_silicon:
            mlx = "mlx"
        elif cls.platform_verdict(hardware):
            mlx = "mlx[cpu]"
        else:
            return None
        return EnvRecipe((mlx, f"mlx-lm>={MIN_MLX_LM}", _LLGUIDANCE, MLX_VLM), overlay=True)

    @classmethod
    def process_env(cls, hardware: HardwareInfo) -> dict[str, str]:
        """``LD_PRELOAD`` of the system's OpenBLAS on Linux, when installed (see :mod:`.runtime`)."""
        if hardware.os != "linux":
            return {}
        path = find_openblas()
        return {"LD_PRELOAD": str(path)} if path is not None else {}

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        where = cls.platform_verdict(hardware)
        return where if not where else super().match(family, spec, hardware)

    # -- life cycle --------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, MLXConfig)
        self.resolved = cfg = self.config.resolve(
            cpu_count=self.hardware.cpu_count,
            metal=self.hardware.is_apple_silicon,
            context_length=self.family.context_length,
        )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local: never reach for the hub
        blas = preload_openblas(cfg.n_threads) if self.hardware.os == "linux" else None
        logger.info("loading %s with MLX (BLAS: %s): %s", self.model_uid, blas or "mlx's own", cfg.model_dump())
        try:
            import mlx_lm  # noqa: F401
        except ImportError as exc:
            raise LaunchFailed(
                f"MLX needs mlx and mlx-lm in this model process (install them with "
                f"`xinference engine install MLX`): {exc}"
            ) from exc
        scheduler = Scheduler(
            self._load_model,
            max_num_seqs=cfg.max_num_seqs,
            prefill_step_size=cfg.prefill_step_size,
            prompt_cache_size=cfg.prompt_cache_size if cfg.prompt_cache_mib > 0 else 0,
            prompt_cache_bytes=cfg.prompt_cache_mib << 20,
            name=f"mlx-{self.model_uid}",
            vision=self.vision,
        )
        await self._start_loop(scheduler, with_type=True)
        self._template = find_chat_template(self.family, self.model_path)
        self._stop_token_ids = self._collect_stop_ids(scheduler.tokenizer)
        self._vocab_size = _logits_width(scheduler.model, scheduler.tokenizer)
        self._scheduler = scheduler
        self.blas = str(blas) if blas else "mlx"

    @property
    def vision(self) -> bool:
        """Whether the family can see: loaded with mlx-vlm and its processor (:mod:`.vision`)."""
        return "vision" in self.family.model_ability

    def _load_model(self) -> tuple[Any, Any]:
        if self.vision:
            model, processor = load_vision_model(self.model_path, trust_remote_code=self.resolved.trust_remote_code)
            self._processor = processor
            return model, processor.tokenizer
        model, tokenizer, overrides = load_model(self.model_path, trust_remote_code=self.resolved.trust_remote_code)
        if overrides:
            logger.info("%s: config values mlx-lm would miss, passed explicitly: %s", self.model_uid, overrides)
        return model, tokenizer

    def _collect_stop_ids(self, tokenizer: Any) -> frozenset[int]:
        ids: set[int] = set(self.family.stop_token_ids)
        listed = getattr(tokenizer, "eos_token_ids", None) or ()
        ids.update(int(t) for t in ([listed] if isinstance(listed, int) else listed))  # mlx-vlm's may be one id
        eos = getattr(tokenizer, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        for text in self.family.stop:
            token = tokenizer.convert_tokens_to_ids(text)
            if isinstance(token, int) and token != getattr(tokenizer, "unk_token_id", None):
                ids.add(token)
        return frozenset(ids)

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        return {**stats, "blas": self.blas} if stats else {}

    def _max_model_len(self) -> int:
        return self.resolved.max_model_len

    # -- requests ----------------------------------------------------------------------------------------------
    def _render(self, request: dict[str, Any]) -> str:
        """The chat prompt from the sandboxed template; tools described in a system message when it ignores them."""
        if self._template is None:
            raise InvalidRequest(
                f"model {self.model_uid!r} has no chat template; use /v1/completions", param="messages"
            )
        messages = request["messages"]
        tools = request.get("tools") or None
        if tools and not template_renders_tools(self._template):
            messages, tools = with_tools(messages, tools), None  # the template would leave them out
        return render(
            self._template,
            messages,
            tools=tools,
            special_tokens=special_tokens_of(self._tokenizer),
            template_kwargs=template_kwargs(request),
            limits=RenderLimits.for_context(self._max_model_len()),
        )

    def _hf_tokenizer(self) -> Any:
        if self._processor is not None:
            return self._tokenizer  # the processor's own Hugging Face tokenizer
        return getattr(self._tokenizer, "_tokenizer", self._tokenizer)  # mlx-lm wraps the HF tokenizer

    async def _encode_media(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None, Any]:
        if kind == "chat" and self._processor is not None and any(True for _ in image_parts(request["messages"])):
            return await asyncio.to_thread(self._encode_images, request)
        return await super()._encode_media(kind, request)

    def _encode_images(self, request: dict[str, Any]) -> tuple[list[int], str, VisionInputs]:
        """(ids with every image's tokens, the rendered prompt, the processor's inputs) of a chat request with
        images; on a worker thread (decoding images and running the processor are CPU work)."""
        parts = list(image_parts(request["messages"]))
        limit = self.resolved.max_images_per_prompt
        if len(parts) > limit:
            raise InvalidRequest(
                f"this request carries {len(parts)} images; model {self.model_uid!r} takes at most {limit} per "
                "request (launch option max_images_per_prompt)",
                param=parts[limit].param,
            )
        images = load_images(request["messages"])
        text = self._render(request)
        inputs = vision_inputs(self._processor, text, images)
        return inputs.ids, text, inputs

    def _encode(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None]:
        if kind == "chat":
            prompt_text = self._render(request)
            return list(self._tokenizer.encode(prompt_text, add_special_tokens=False)), prompt_text
        return list(self._tokenizer.encode(request["prompt"])), None

    def _new_sequence(self, ids: list[int], params: SamplingParams, sink: Any, plan: RequestPlan) -> BaseSequence:
        grammar = None
        if plan.constraint is not None:
            assert self._grammar_tok is not None
            grammar = GrammarMask(plan.constraint.matcher(self._grammar_tok), self._vocab_size)
        return Sequence(
            ids,
            params,
            sink,
            sampler=make_sampler(params),
            processors=make_processors(params, grammar),
            grammar=grammar,
        )

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt a chat call would build from ``request`` (same template, same tokenizer, the same image
        tokens), counted."""
        self._ready()
        if self._processor is not None and any(True for _ in image_parts(request["messages"])):
            ids, _, _ = await self._encode_media("chat", request)
            return len(ids)
        return len(self._tokenizer.encode(self._render(request), add_special_tokens=False))
