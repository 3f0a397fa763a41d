"""Causal LMs in the pytorch format (a safetensors folder) through Hugging Face Transformers.

The model lives on the scheduler thread of :mod:`.batching`, which decodes every running request together
(continuous batching, up to ``max_num_seqs``). This adapter turns OpenAI requests into prompts (the tokenizer's chat
template, else the family's), sampling parameters and stop conditions, and hands the scheduler's output back as
OpenAI-shaped responses or chunks; streamed chunks go through a :class:`ChunkStream` without ever waiting on the
consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
import uuid
from typing import Any, ClassVar, Iterator

from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.grammar import Constraint, GrammarTokenizer
from xinference.engines.libcheck import check_library
from xinference.engines.transformers.batching import Scheduler, Sequence
from xinference.engines.transformers.config import ResolvedTransformersConfig, TransformersConfig
from xinference.engines.continuous.outputs import (
    CollectSink,
    StreamGroup,
    StreamSink,
    chat_logprobs,
    completion_logprobs,
    usage,
)
from xinference.engines.continuous.requests import RequestPlan, sampling_params, template_kwargs
from xinference.errors import (
    ContextLengthExceeded,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    XinferenceError,
)
from xinference.model.parsers.postprocess import BARE_JSON_CALLS, ChatOutputParser
from xinference.model.parsers.registry import reasoning_tags_of, tool_call_format_of
from xinference.model.parsers.tool_prompt import history_for_template, template_renders_tools, with_tools

__all__ = ["TransformersEngine"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = "pip install 'xinference[transformers]'"


@contextlib.contextmanager
def _template_errors() -> Iterator[None]:
    try:
        yield
    except XinferenceError:
        raise
    except Exception as exc:  # noqa: BLE001 - a template that fails on these messages is the client's problem
        raise InvalidRequest(f"the chat template cannot render these messages: {exc}", param="messages") from exc


class TransformersEngine(Engine):
    """pytorch-format causal LMs on CPU or GPU, with continuous batching."""

    name: ClassVar[str] = "Transformers"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    continuous_batching: ClassVar[bool] = True
    config_class = TransformersConfig
    context_option: ClassVar[str | None] = "max_model_len"

    resolved: ResolvedTransformersConfig
    _scheduler: Scheduler | None = None
    _tokenizer: Any = None
    _stop_token_ids: frozenset[int] = frozenset()
    _vocab_size: int = 0
    _grammar_tok: GrammarTokenizer | None = None

    @classmethod
    def check_lib(cls) -> Verdict:
        # 4.56: the KV-cache ``layers`` API the batching relies on
        for module, minimum in (("torch", None), ("transformers", "4.56")):
            verdict = check_library(cls.name, module, module, minimum, _INSTALL_HINT)
            if not verdict:
                return verdict
        return Verdict.ok()

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, TransformersConfig)
        self.resolved = self.config.resolve(cpu_count=self.hardware.cpu_count, gpu=self.hardware.cuda_available,
                                            context_length=self.family.context_length)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local: never reach for the hub
        logger.info("loading %s with Transformers: %s", self.model_uid, self.resolved.model_dump())
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as exc:
            raise LaunchFailed(f"Transformers needs torch and transformers ({_INSTALL_HINT}): {exc}") from exc
        cfg = self.resolved
        scheduler = Scheduler(self._load_model, max_num_seqs=cfg.max_num_seqs, device=cfg.device,
                              name=f"tf-{self.model_uid}")
        scheduler.start()
        try:
            await asyncio.to_thread(scheduler.wait_loaded)
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"Transformers could not load {self.model_uid}: {exc}") from exc
        self._tokenizer = scheduler.tokenizer
        self._stop_token_ids = self._collect_stop_ids(scheduler.model, scheduler.tokenizer)
        self._vocab_size = int(scheduler.model.config.vocab_size)
        self._grammar_lock = threading.Lock()
        self._scheduler = scheduler

    def _load_model(self) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.resolved
        torch.set_num_threads(cfg.n_threads)
        dtype: Any = cfg.dtype if cfg.dtype == "auto" else getattr(torch, cfg.dtype)
        common = {"local_files_only": True, "trust_remote_code": cfg.trust_remote_code}
        tokenizer = AutoTokenizer.from_pretrained(self.model_path, **common)
        model: Any = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype, **common)
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

    async def unload(self) -> None:
        if self._scheduler is not None:
            scheduler, self._scheduler = self._scheduler, None
            await asyncio.to_thread(scheduler.stop)

    def stats(self) -> dict[str, Any]:
        return self._scheduler.stats() if self._scheduler is not None else {}

    def _ready(self) -> Scheduler:
        if self._scheduler is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._scheduler

    # -- requests ------------------------------------------------------------------------------------------------
    def _render(self, request: dict[str, Any]) -> str:
        """The chat prompt: the tokenizer's template (else the family's), tools described when it cannot."""
        tokenizer = self._tokenizer
        own = getattr(tokenizer, "chat_template", None)
        template = None if own else self.family.chat_template
        if template is None and not own:
            raise InvalidRequest(f"model {self.model_uid!r} has no chat template; use /v1/completions",
                                 param="messages")
        renders_tools = self._renders_tools()
        messages = history_for_template(request["messages"], renders_tools)
        tools = request.get("tools") or None
        if tools and not renders_tools:
            messages, tools = with_tools(messages, tools), None  # the template would leave them out
        with _template_errors():
            text: str = tokenizer.apply_chat_template(
                messages, tools=tools, chat_template=template, add_generation_prompt=True, tokenize=False,
                **template_kwargs(request),
            )
        return text

    def _prompt_ids(self, kind: str, request: dict[str, Any]) -> list[int]:
        tokenizer = self._tokenizer
        if kind == "completions":
            ids: list[int] = tokenizer(request["prompt"], add_special_tokens=True)["input_ids"]
            return ids
        ids = tokenizer(self._render(request), add_special_tokens=False)["input_ids"]
        return ids

    def _plan(self, kind: str, request: dict[str, Any], prompt_len: int) -> RequestPlan:
        limit = self.resolved.max_model_len
        room = limit - prompt_len
        if room < 1:
            raise ContextLengthExceeded(
                f"the prompt is {prompt_len} tokens but this model's context holds {limit} tokens; shorten the "
                "prompt or relaunch the model with a larger max_model_len", param="messages")
        stops = tuple(s for s in dict.fromkeys([*self.family.stop, *(request.get("stop") or [])]) if s)
        return sampling_params(
            kind, request, max_tokens=min(int(request.get("max_tokens") or room), room), stop=stops,
            stop_token_ids=self._stop_token_ids, vocab_size=self._vocab_size,
            tool_format=tool_call_format_of(self.family),
        )

    def _grammar_tokenizer(self) -> GrammarTokenizer:
        """Built at the first constrained request (~0.5 s), then shared."""
        with self._grammar_lock:
            if self._grammar_tok is None:
                self._grammar_tok = GrammarTokenizer.from_hf(self._tokenizer, self._vocab_size,
                                                             sorted(self._stop_token_ids))
            return self._grammar_tok

    def _output_parser(self, request: dict[str, Any], prompt_text: str | None,
                       constraint: Constraint | None) -> ChatOutputParser | None:
        if constraint is not None and constraint.kind != "tool_call":
            return None  # the grammar made it JSON: nothing to parse out of it
        tags = reasoning_tags_of(self.family)
        primed = bool(tags and prompt_text and prompt_text.rstrip().endswith(tags.start))
        fmt = constraint.tool_format if constraint is not None else None
        if fmt is None and tool_call_format_of(self.family) is None and not self._renders_tools():
            fmt = BARE_JSON_CALLS  # the tools were described with that very call shape (tool_prompt.py)
        return ChatOutputParser.for_request(self.family, request, primed=primed, tool_format=fmt)

    def _renders_tools(self) -> bool:
        own = getattr(self._tokenizer, "chat_template", None)
        return template_renders_tools(own or self.family.chat_template)

    async def _build(self, kind: str, request: dict[str, Any]
                     ) -> tuple[list[int], RequestPlan, ChatOutputParser | None]:
        """Prompt ids, the validated plan and the output parser (chat) of a request; 400s before any token."""
        self._ready()
        prompt_text = self._render(request) if kind == "chat" else None
        if prompt_text is not None:
            ids: list[int] = self._tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        else:
            ids = self._prompt_ids(kind, request)
        plan = self._plan(kind, request, len(ids))
        if plan.constraint is not None:
            tokenizer = await asyncio.to_thread(self._grammar_tokenizer)
            plan.constraint.matcher(tokenizer)  # a schema llguidance cannot build is a 400 before any token
        parser = self._output_parser(request, prompt_text, plan.constraint) if kind == "chat" else None
        if parser is not None and parser.tool_format is not None:
            special = set(getattr(self._tokenizer, "all_special_tokens", ()))
            if any(marker in special for marker in parser.tool_format.openers):  # e.g. Mistral's [TOOL_CALLS]
                plan.params = dataclasses.replace(plan.params, keep_special=True)
        return ids, plan, parser

    def _sequences(self, ids: list[int], plan: RequestPlan, sinks: list[Any]) -> list[Sequence]:
        seqs = []
        for index, sink in enumerate(sinks):
            params = plan.params
            if params.seed is not None and index:
                params = dataclasses.replace(params, seed=params.seed + index)  # n choices, not n copies
            seq = Sequence(ids, params, sink)
            if plan.constraint is not None:
                assert self._grammar_tok is not None
                seq.grammar = plan.constraint.matcher(self._grammar_tok)
            seqs.append(seq)
        return seqs

    async def _complete(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        ids, plan, parser = await self._build(kind, request)
        loop = asyncio.get_running_loop()
        sinks = [CollectSink(loop) for _ in range(plan.n)]
        seqs = self._sequences(ids, plan, sinks)
        scheduler = self._ready()
        for seq in seqs:
            scheduler.submit(seq)
        try:
            texts = await asyncio.gather(*(sink.future for sink in sinks))
        except (asyncio.CancelledError, XinferenceError):
            for sink in sinks:
                sink.cancelled = True  # the caller went away: the sequences leave the batch at the next step
            scheduler.wake()
            raise
        choices = [self._choice(kind, i, text, seq) for i, (text, seq) in enumerate(zip(texts, seqs, strict=True))]
        obj, prefix = ("chat.completion", "chatcmpl") if kind == "chat" else ("text_completion", "cmpl")
        response = {"id": f"{prefix}-{uuid.uuid4().hex}", "object": obj, "created": int(time.time()),
                    "model": self.model_uid, "choices": choices,
                    "usage": usage(len(ids), sum(len(seq.generated) for seq in seqs))}
        if parser is not None:
            parser.fix_response(response)
        return response

    def _choice(self, kind: str, index: int, text: str, seq: Sequence) -> dict[str, Any]:
        reason = seq.finish_reason or "stop"
        entries = seq.token_logprobs if seq.params.logprobs else []
        if kind == "chat":
            return {"index": index, "message": {"role": "assistant", "content": text},
                    "logprobs": chat_logprobs(self._tokenizer, entries) if entries else None, "finish_reason": reason}
        logprobs = completion_logprobs(self._tokenizer, entries) if seq.params.logprobs else None
        return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}

    async def _stream(self, kind: str, request: dict[str, Any]) -> ChunkStream:
        ids, plan, parser = await self._build(kind, request)
        stream = ChunkStream()
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        group = StreamGroup(stream, kind, self.model_uid, len(ids), plan.n, include_usage,
                            parser.stream() if parser is not None else None, self._tokenizer)
        group.start(plan.n)
        seqs = self._sequences(ids, plan, [StreamSink(group, i) for i in range(plan.n)])
        scheduler = self._ready()
        for seq in seqs:
            scheduler.submit(seq)
        return stream

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("chat", request)

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        return await self._stream("chat", request)

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt a chat call would build from ``request`` (same template, same tokenizer), counted."""
        self._ready()
        return len(await asyncio.to_thread(self._prompt_ids, "chat", request))

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("completions", request)

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        return await self._stream("completions", request)
