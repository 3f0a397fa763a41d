"""The request side both in-process batching engines share (Transformers, MLX): from an OpenAI request to
sequences in the decode loop, and from their output back to a response or a stream of chunks.

:class:`BatchingEngine` validates a request into a plan (:mod:`.requests`), builds the output parser for tool calls
and reasoning, hands one sequence per choice to the engine's :class:`~.loop.DecodeLoop`, and shapes what comes back
(:mod:`.outputs`). A subclass loads the model, encodes prompts (its own chat template handling) and makes its
sequences (its own sampling state). A non-streamed call that is cancelled (its client went away, see
``xinference/api/gateway/disconnect.py``) marks its sequences abandoned and wakes the loop, which takes them out of
the batch at the next step; a streamed one is abandoned by cancelling its :class:`ChunkStream`.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import threading
import time
import uuid
from typing import Any

from xinference.engines.base import ChunkStream, Engine
from xinference.engines.continuous.loop import DecodeLoop, Sequence
from xinference.engines.continuous.outputs import (
    CollectSink,
    StreamGroup,
    StreamSink,
    chat_logprobs,
    completion_logprobs,
    usage,
)
from xinference.engines.continuous.requests import RequestPlan, SamplingParams, sampling_params
from xinference.engines.grammar import Constraint, GrammarTokenizer
from xinference.errors import (
    ContextLengthExceeded,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    XinferenceError,
)
from xinference.model.images import image_parts
from xinference.model.parsers.postprocess import ChatOutputParser
from xinference.model.parsers.registry import reasoning_tags_of, tool_call_format_of
from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = ["BatchingEngine"]


class BatchingEngine(Engine):
    """An LLM engine whose model runs on a :class:`DecodeLoop` in this process; see the module docstring."""

    _scheduler: DecodeLoop | None = None
    _tokenizer: Any = None
    _stop_token_ids: frozenset[int] = frozenset()
    _vocab_size: int = 0
    _grammar_tok: GrammarTokenizer | None = None
    _grammar_lock: threading.Lock

    # -- what an engine brings ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def _max_model_len(self) -> int:
        """Prompt and output tokens of one sequence at the most (the resolved ``max_model_len``)."""

    @abc.abstractmethod
    def _encode(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None]:
        """The prompt's token ids, and for chat the rendered prompt text; 400s for what cannot be rendered."""

    @abc.abstractmethod
    def _new_sequence(self, ids: list[int], params: SamplingParams, sink: Any, plan: RequestPlan) -> Sequence:
        """One choice's sequence with the engine's sampling state (and grammar, when ``plan`` has a constraint)."""

    def _hf_tokenizer(self) -> Any:
        """The Hugging Face tokenizer the grammar's token table is built from."""
        return self._tokenizer

    def _fallback_tool_format(self) -> ToolCallFormat | None:
        """How tool calls are parsed when neither the grammar nor the family names a format."""
        return None

    def _adjust_plan(self, plan: RequestPlan, parser: ChatOutputParser | None) -> None:
        """Last changes to a validated chat plan once its parser is known (in place)."""

    async def _encode_media(self, kind: str, request: dict[str, Any]) -> tuple[list[int], str | None, Any]:
        """The prompt's token ids, its rendered text (chat) and the engine's model inputs for its images (None
        without images): where every request starts. By default :meth:`_encode`, and a request with images is
        refused with a 400 naming the first one; an engine that can see overrides this (decoding images and
        running a processor is CPU work, to do off the event loop), and its prompt ids then count the image
        tokens."""
        if kind == "chat":
            for part in image_parts(request.get("messages") or []):
                raise InvalidRequest(
                    f"model {self.model_uid!r} cannot read images on the {self.name} engine; send text only",
                    param=part.param,
                )
        ids, text = self._encode(kind, request)
        return ids, text, None

    # -- life cycle --------------------------------------------------------------------------------------------
    async def _start_loop(self, scheduler: DecodeLoop, *, with_type: bool = False) -> None:
        """Start ``scheduler`` (it loads the model on its thread) and wait; a failed load is LaunchFailed with the
        backend's text (and its exception's type when ``with_type``). The scheduler is the engine's from the start,
        so that ``unload`` stops it whatever fails later in ``load``."""
        self._scheduler = scheduler
        scheduler.start()
        try:
            await asyncio.to_thread(scheduler.wait_loaded)
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            detail = f"{type(exc).__name__}: {exc}" if with_type else str(exc)
            raise LaunchFailed(f"{self.name} could not load {self.model_uid}: {detail}") from exc
        self._tokenizer = scheduler.tokenizer
        self._grammar_lock = threading.Lock()

    async def unload(self) -> None:
        if self._scheduler is not None:
            scheduler, self._scheduler = self._scheduler, None
            await asyncio.to_thread(scheduler.stop)

    def stats(self) -> dict[str, Any]:
        return self._scheduler.stats() if self._scheduler is not None else {}

    def _ready(self) -> DecodeLoop:
        if self._scheduler is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._scheduler

    # -- requests ----------------------------------------------------------------------------------------------
    def _plan(self, kind: str, request: dict[str, Any], prompt_len: int) -> RequestPlan:
        limit = self._max_model_len()
        room = limit - prompt_len
        if room < 1:
            raise ContextLengthExceeded(
                f"the prompt is {prompt_len} tokens but this model's context holds {limit} tokens; shorten the "
                "prompt or relaunch the model with a larger max_model_len",
                param="messages",
            )
        stops = tuple(s for s in dict.fromkeys([*self.family.stop, *(request.get("stop") or [])]) if s)
        return sampling_params(
            kind,
            request,
            max_tokens=min(int(request.get("max_tokens") or room), room),
            stop=stops,
            stop_token_ids=self._stop_token_ids,
            vocab_size=self._vocab_size,
            tool_format=tool_call_format_of(self.family),
            engine=self.name,
        )

    def _grammar_tokenizer(self) -> GrammarTokenizer:
        """Built at the first constrained request (~0.5 s), then shared."""
        with self._grammar_lock:
            if self._grammar_tok is None:
                self._grammar_tok = GrammarTokenizer.from_hf(
                    self._hf_tokenizer(), self._vocab_size, sorted(self._stop_token_ids)
                )
            return self._grammar_tok

    def _output_parser(
        self, request: dict[str, Any], prompt_text: str | None, constraint: Constraint | None
    ) -> ChatOutputParser | None:
        if constraint is not None and constraint.kind != "tool_call":
            return None  # the grammar made it JSON: nothing to parse out of it
        tags = reasoning_tags_of(self.family)
        primed = bool(tags and prompt_text and prompt_text.rstrip().endswith(tags.start))
        fmt = constraint.tool_format if constraint is not None else None
        if fmt is None and tool_call_format_of(self.family) is None:
            fmt = self._fallback_tool_format()
        return ChatOutputParser.for_request(self.family, request, primed=primed, tool_format=fmt)

    async def _build(
        self, kind: str, request: dict[str, Any]
    ) -> tuple[list[int], RequestPlan, ChatOutputParser | None]:
        """Prompt ids, the validated plan and the output parser (chat) of a request; 400s before any token."""
        self._ready()
        ids, prompt_text, media = await self._encode_media(kind, request)
        plan = self._plan(kind, request, len(ids))
        plan.media = media
        if plan.constraint is not None:
            tokenizer = await asyncio.to_thread(self._grammar_tokenizer)
            plan.constraint.matcher(tokenizer)  # a schema llguidance cannot build is a 400 before any token
        parser = self._output_parser(request, prompt_text, plan.constraint) if kind == "chat" else None
        if kind == "chat":
            self._adjust_plan(plan, parser)
        return ids, plan, parser

    def _sequences(self, ids: list[int], plan: RequestPlan, sinks: list[Any]) -> list[Sequence]:
        seqs = []
        for index, sink in enumerate(sinks):
            params = plan.params
            if params.seed is not None and index:
                params = dataclasses.replace(params, seed=params.seed + index)  # n choices, not n copies
            seq = self._new_sequence(ids, params, sink, plan)
            seq.media = plan.media
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
        response = {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "object": obj,
            "created": int(time.time()),
            "model": self.model_uid,
            "choices": choices,
            "usage": usage(len(ids), sum(len(seq.generated) for seq in seqs)),
        }
        if parser is not None:
            parser.fix_response(response)  # also keeps one call per message when parallel_tool_calls is false
        return response

    def _choice(self, kind: str, index: int, text: str, seq: Sequence) -> dict[str, Any]:
        reason = seq.finish_reason or "stop"
        entries = seq.token_logprobs if seq.params.logprobs else []
        if kind == "chat":
            return {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "logprobs": chat_logprobs(self._tokenizer, entries) if entries else None,
                "finish_reason": reason,
            }
        logprobs = completion_logprobs(self._tokenizer, entries) if seq.params.logprobs else None
        return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}

    async def _stream(self, kind: str, request: dict[str, Any]) -> ChunkStream:
        ids, plan, parser = await self._build(kind, request)
        stream = ChunkStream()
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        group = StreamGroup(
            stream,
            kind,
            self.model_uid,
            len(ids),
            plan.n,
            include_usage,
            parser.stream() if parser is not None else None,
            self._tokenizer,
        )
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

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("completions", request)

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        return await self._stream("completions", request)
