"""Causal LMs in the pytorch format (a safetensors folder) through Hugging Face Transformers.

The model lives on the scheduler thread of :mod:`.batching`, which decodes every running request together
(continuous batching, up to ``max_num_seqs``). This adapter loads the model and turns OpenAI requests into prompts
(the tokenizer's chat template, else the family's, rendered by :mod:`xinference.model.prompt_render` as every
engine's are); validation, sequences, responses and chunks (streamed through a
:class:`ChunkStream` without ever waiting on the consumer) are
:class:`~xinference.engines.continuous.adapter.BatchingEngine`'s, shared with the MLX engine.

A family with the ``vision`` ability is loaded as an image-text-to-text model (``AutoModelForImageTextToText``)
with its ``AutoProcessor``. A chat request with images has them decoded (:func:`xinference.model.images.load_images`)
and the rendered prompt and the images run through the processor on a worker thread: the processor expands each
image placeholder the template wrote into the image's tokens, so the prompt's ids (and ``usage.prompt_tokens``)
count them, and its pixel inputs travel with the request's sequences to their prefill in the same continuous
batch as text requests; decoding is text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Iterable
from typing import Any, ClassVar

from xinference.engines.continuous.adapter import BatchingEngine
from xinference.engines.continuous.loop import Sequence as BaseSequence
from xinference.engines.continuous.requests import RequestPlan, SamplingParams, template_kwargs
from xinference.engines.libraries import TRANSFORMERS_HINT
from xinference.engines.transformers.batching import Scheduler, Sequence
from xinference.engines.transformers.config import ResolvedTransformersConfig, TransformersConfig
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.images import image_parts, load_images
from xinference.model.parsers.postprocess import BARE_JSON_CALLS, ChatOutputParser
from xinference.model.parsers.tool_calls import ToolCallFormat
from xinference.model.parsers.tool_prompt import history_for_template, template_renders_tools, with_tools
from xinference.model.prompt_render import RenderLimits, render, special_tokens_of

__all__ = ["TransformersEngine", "markers_are_special"]

logger = logging.getLogger(__name__)


def markers_are_special(parser: ChatOutputParser, special_tokens: Iterable[str]) -> bool:
    """Whether the text the parser reads must keep the tokenizer's special tokens: a tool-call opener or a reasoning
    tag is, or holds, one (Mistral's ``[TOOL_CALLS]``, Kimi's and DeepSeek's call sections, gpt-oss's
    ``<|channel|>``), and decoding without them would hide the very markers the parser looks for."""
    markers: list[str] = []
    if parser.tool_format is not None:
        markers.extend(parser.tool_format.openers)
    if parser.reasoning is not None:
        markers.extend((parser.reasoning.start, parser.reasoning.end))
    special = [token for token in special_tokens if token]
    return any(token in marker for marker in markers for token in special)


class TransformersEngine(BatchingEngine):
    """pytorch-format causal LMs on CPU or GPU, with continuous batching (the request side is
    :class:`~xinference.engines.continuous.adapter.BatchingEngine`'s)."""

    name: ClassVar[str] = "Transformers"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    continuous_batching: ClassVar[bool] = True
    reads_images: ClassVar[bool] = True  # vision families load with AutoProcessor + AutoModelForImageTextToText
    config_class = TransformersConfig
    context_option: ClassVar[str | None] = "max_model_len"

    resolved: ResolvedTransformersConfig
    _processor: Any = None

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, TransformersConfig)
        self.resolved = self.config.resolve(
            cpu_count=self.hardware.cpu_count,
            gpu=self.hardware.cuda_available,
            context_length=self.family.context_length,
        )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local: never reach for the hub
        logger.info("loading %s with Transformers: %s", self.model_uid, self.resolved.model_dump())
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as exc:
            raise LaunchFailed(f"Transformers needs torch and transformers ({TRANSFORMERS_HINT}): {exc}") from exc
        cfg = self.resolved
        scheduler = Scheduler(
            self._load_model,
            max_num_seqs=cfg.max_num_seqs,
            device=cfg.device,
            name=f"tf-{self.model_uid}",
            prefill_tokens=cfg.prefill_step_size,
        )
        await self._start_loop(scheduler)
        self._stop_token_ids = self._collect_stop_ids(scheduler.model, scheduler.tokenizer)
        self._vocab_size = int(scheduler.model.config.get_text_config().vocab_size)
        self._scheduler = scheduler

    @property
    def vision(self) -> bool:
        """Whether the family can see: loaded with its processor as an image-text-to-text model."""
        return "vision" in self.family.model_ability

    def _load_model(self) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

        cfg = self.resolved
        torch.set_num_threads(cfg.n_threads)
        dtype: Any = cfg.dtype if cfg.dtype == "auto" else getattr(torch, cfg.dtype)
        common = {"local_files_only": True, "trust_remote_code": cfg.trust_remote_code}
        model: Any
        if self.vision:
            processor = _load_processor(self.model_path, common)
            tokenizer = processor.tokenizer
            model = AutoModelForImageTextToText.from_pretrained(self.model_path, dtype=dtype, **common)
            self._processor = processor
        else:
            tokenizer = AutoTokenizer.from_pretrained(self.model_path, **common)
            model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype, **common)
        model = model.to(cfg.device)
        model.eval()
        return model, tokenizer

    def _collect_stop_ids(self, model: Any, tokenizer: Any) -> frozenset[int]:
        ids: set[int] = set(self.family.stop_token_ids)
        for source in (getattr(model, "generation_config", None), tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(v for v in value if isinstance(v, int))
        for text in self.family.stop:
            token = tokenizer.convert_tokens_to_ids(text)
            if isinstance(token, int) and token != tokenizer.unk_token_id:
                ids.add(token)
        return frozenset(ids)

    def _max_model_len(self) -> int:
        return self.resolved.max_model_len

    # -- requests ------------------------------------------------------------------------------------------------
    def _template(self, tools: bool = False) -> str | None:
        """The tokenizer's template (of named ones: ``tool_use`` for a request with tools, else ``default``),
        else the family's; the choice ``apply_chat_template`` makes."""
        own = getattr(self._tokenizer, "chat_template", None)
        if isinstance(own, dict):
            own = own.get("tool_use") if tools and own.get("tool_use") else own.get("default")
        return own if isinstance(own, str) and own else self.family.chat_template

    def _render(self, request: dict[str, Any]) -> str:
        """The chat prompt from the template (see :meth:`_template`), rendered by the platform's sandboxed, bounded
        renderer with the tokenizer's special tokens, as ``apply_chat_template`` would; tools described in a
        system message when the template ignores them."""
        tools = request.get("tools") or None
        template = self._template(tools=bool(tools))
        if not template:
            raise InvalidRequest(
                f"model {self.model_uid!r} has no chat template; use /v1/completions", param="messages"
            )
        renders_tools = template_renders_tools(template)
        messages = history_for_template(request["messages"], renders_tools)
        if tools and not renders_tools:
            messages, tools = with_tools(messages, tools), None  # the template would leave them out
        return render(
            template,
            messages,
            tools=tools,
            special_tokens=special_tokens_of(self._tokenizer),
            template_kwargs=template_kwargs(request),
            limits=RenderLimits.for_context(self._max_model_len()),
        )

    def _prompt_ids(self, kind: str, request: dict[str, Any]) -> list[int]:
        tokenizer = self._tokenizer
        if kind == "completions":
            ids: list[int] = tokenizer(request["prompt"], add_special_tokens=True)["input_ids"]
            return ids
        ids = tokenizer(self._render(request), add_special_tokens=False)["input_ids"]
        return ids

    def _renders_tools(self) -> bool:
        return template_renders_tools(self._template(tools=True))

    def _fallback_tool_format(self) -> ToolCallFormat | None:
        # a template that cannot render tools had them described with that very call shape (tool_prompt.py)
        return None if self._renders_tools() else BARE_JSON_CALLS

    async def _encode_media(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None, Any]:
        if kind == "chat" and self.vision and any(True for _ in image_parts(request.get("messages") or [])):
            return await asyncio.to_thread(self._encode_images, request)
        return await super()._encode_media(kind, request)

    def _encode_images(self, request: dict[str, Any]) -> tuple[list[int], str, dict[str, Any]]:
        """(ids with every image's tokens, the rendered prompt, the processor's image inputs) of a chat request
        with images; on a worker thread (image decoding and the processor are CPU work)."""
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
        try:
            inputs = self._processor(text=[text], images=images, add_special_tokens=False, return_tensors="pt")
        except ValueError as exc:  # the template did not place one image token per image
            raise InvalidRequest(
                f"model {self.model_uid!r} could not place the images in its prompt: {exc}", param="messages"
            ) from exc
        ids: list[int] = inputs.pop("input_ids")[0].tolist()
        inputs.pop("attention_mask", None)  # one unpadded prompt: the prefill attends to all of it
        return ids, text, dict(inputs)

    def _encode(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None]:
        if kind != "chat":
            return self._prompt_ids(kind, request), None
        prompt_text = self._render(request)
        ids: list[int] = self._tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        return ids, prompt_text

    def _adjust_plan(self, plan: RequestPlan, parser: ChatOutputParser | None) -> None:
        special = getattr(self._tokenizer, "all_special_tokens", ())
        if parser is not None and markers_are_special(parser, special):
            plan.params = dataclasses.replace(plan.params, keep_special=True)

    def _new_sequence(self, ids: list[int], params: SamplingParams, sink: Any, plan: RequestPlan) -> BaseSequence:
        seq = Sequence(ids, params, sink)
        if plan.constraint is not None:
            assert self._grammar_tok is not None
            seq.grammar = plan.constraint.matcher(self._grammar_tok)
        return seq

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt a chat call would build from ``request`` (same template, same tokenizer, the same image
        tokens), counted."""
        self._ready()
        if self.vision and any(True for _ in image_parts(request.get("messages") or [])):
            ids, _, _ = await self._encode_media("chat", request)
            return len(ids)
        return len(await asyncio.to_thread(self._prompt_ids, "chat", request))


def _load_processor(path: Any, common: dict[str, Any]) -> Any:
    """The model's ``AutoProcessor``; a folder whose processor cannot load (no processor files, or one that needs
    a library missing here) fails the launch with the reason, as the model could not see without it."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(path, **common)  # type: ignore[no-untyped-call]
    except ImportError as exc:  # e.g. Qwen2-VL's video processor needs torchvision
        raise LaunchFailed(f"the model's processor needs a library that is not installed: {exc}") from exc
    except (OSError, ValueError) as exc:  # no preprocessor_config.json, or one Transformers cannot read
        raise LaunchFailed(f"a vision model needs its processor files beside the weights: {exc}") from exc
    if getattr(processor, "image_processor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise LaunchFailed(
            f"a vision model needs an image processor and a tokenizer in its folder; AutoProcessor found only "
            f"{type(processor).__name__}"
        )
    return processor
