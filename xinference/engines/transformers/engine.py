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
import logging
import os
import time
import uuid
from typing import Any, ClassVar, Iterator

from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.libcheck import check_library
from xinference.engines.transformers.batching import SamplingParams, Scheduler, Sequence
from xinference.engines.transformers.config import ResolvedTransformersConfig, TransformersConfig
from xinference.errors import (
    ContextLengthExceeded,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    UnsupportedOption,
    XinferenceError,
)

__all__ = ["TransformersEngine"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = "pip install 'xinference[transformers]'"
#: Request fields this engine cannot honour yet; each is a 400 naming it.
_UNSUPPORTED = {
    "tools": "tool calls are not supported by the Transformers engine yet; use llama.cpp",
    "response_format": "response_format (JSON mode) is not supported by the Transformers engine yet",
    "logprobs": "logprobs are not supported by the Transformers engine yet",
    "logit_bias": "logit_bias is not supported by the Transformers engine yet",
}


@contextlib.contextmanager
def _template_errors() -> Iterator[None]:
    try:
        yield
    except XinferenceError:
        raise
    except Exception as exc:  # noqa: BLE001 - a template that fails on these messages is the client's problem
        raise InvalidRequest(f"the chat template cannot render these messages: {exc}", param="messages") from exc


class _StreamSink:
    """Turns a sequence's text into chunks pushed to a ChunkStream (runs on the scheduler thread)."""

    def __init__(self, stream: ChunkStream, kind: str, uid: str, prompt_tokens: int, include_usage: bool) -> None:
        self.stream = stream
        self.kind = kind
        self.uid = uid
        self.prompt_tokens = prompt_tokens
        self.include_usage = include_usage
        self.id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    @property
    def cancelled(self) -> bool:
        return self.stream.cancelled

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": self.id, "object": obj, "created": self.created, "model": self.uid, "choices": choices}

    def _choice(self, text: str | None, finish: str | None) -> dict[str, Any]:
        if self.kind == "chat":
            delta = {} if text is None else {"content": text}
            return {"index": 0, "delta": delta, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def start(self) -> None:
        if self.kind == "chat":
            first = self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            self.stream.push(first)

    def on_text(self, seq: Sequence, text: str) -> None:
        self.stream.push(self._chunk([self._choice(text, None)]))

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.stream.push(self._chunk([self._choice(None, reason)]))
        if self.include_usage:
            usage = self._chunk([])
            usage["usage"] = _usage(self.prompt_tokens, len(seq.generated))
            self.stream.push(usage)
        self.stream.finish()

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.stream.finish(error)


class _CollectSink:
    """Collects a whole completion and resolves a future on the actor's loop (runs on the scheduler thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[str] = loop.create_future()
        self.parts: list[str] = []
        self.cancelled = False

    def on_text(self, seq: Sequence, text: str) -> None:
        self.parts.append(text)

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.loop.call_soon_threadsafe(_resolve, self.future, "".join(self.parts), None)

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.loop.call_soon_threadsafe(_resolve, self.future, None, error)


def _resolve(future: asyncio.Future[str], value: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value or "")


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class TransformersEngine(Engine):
    """pytorch-format causal LMs on CPU or GPU, with continuous batching."""

    name: ClassVar[str] = "Transformers"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    continuous_batching: ClassVar[bool] = True
    config_class = TransformersConfig

    resolved: ResolvedTransformersConfig
    _scheduler: Scheduler | None = None
    _tokenizer: Any = None
    _stop_token_ids: frozenset[int] = frozenset()

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
    def _prompt_ids(self, kind: str, request: dict[str, Any]) -> list[int]:
        tokenizer = self._tokenizer
        if kind == "completions":
            ids: list[int] = tokenizer(request["prompt"], add_special_tokens=True)["input_ids"]
            return ids
        template = None if getattr(tokenizer, "chat_template", None) else self.family.chat_template
        if template is None and not getattr(tokenizer, "chat_template", None):
            raise InvalidRequest(f"model {self.model_uid!r} has no chat template; use /v1/completions",
                                 param="messages")
        with _template_errors():
            text = tokenizer.apply_chat_template(
                request["messages"], chat_template=template, add_generation_prompt=True, tokenize=False,
                **(request.get("chat_template_kwargs") or {}),
            )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def _sequence_params(self, request: dict[str, Any], prompt_len: int) -> SamplingParams:
        for field, why in _UNSUPPORTED.items():
            if request.get(field):
                raise UnsupportedOption(why, param=field)
        limit = self.resolved.max_model_len
        room = limit - prompt_len
        if room < 1:
            raise ContextLengthExceeded(
                f"the prompt is {prompt_len} tokens but this model's context holds {limit} tokens; shorten the "
                "prompt or relaunch the model with a larger max_model_len", param="messages")
        max_tokens = min(int(request.get("max_tokens") or room), room)
        stops = tuple(dict.fromkeys([*self.family.stop, *(request.get("stop") or [])]))
        temperature = request.get("temperature")
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if temperature is None else float(temperature),
            top_p=float(request.get("top_p") or 1.0),
            top_k=max(0, int(request.get("top_k") or 0)),
            seed=request.get("seed"),
            repetition_penalty=float(request.get("repeat_penalty") or 1.0),
            presence_penalty=float(request.get("presence_penalty") or 0.0),
            frequency_penalty=float(request.get("frequency_penalty") or 0.0),
            stop=tuple(s for s in stops if s),
            stop_token_ids=frozenset() if request.get("ignore_eos") else self._stop_token_ids,
        )

    def _build(self, kind: str, request: dict[str, Any]) -> tuple[list[int], SamplingParams]:
        self._ready()
        ids = self._prompt_ids(kind, request)
        return ids, self._sequence_params(request, len(ids))

    async def _complete(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        ids, params = self._build(kind, request)
        sink = _CollectSink(asyncio.get_running_loop())
        seq = Sequence(ids, params, sink)
        scheduler = self._ready()
        scheduler.submit(seq)
        try:
            text = await sink.future
        except asyncio.CancelledError:
            sink.cancelled = True  # the caller went away: the sequence leaves the batch at the next step
            scheduler.wake()
            raise
        usage = _usage(len(ids), len(seq.generated))
        reason = seq.finish_reason or "stop"
        if kind == "chat":
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": reason}
            obj, prefix = "chat.completion", "chatcmpl"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
            obj, prefix = "text_completion", "cmpl"
        return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": obj, "created": int(time.time()),
                "model": self.model_uid, "choices": [choice], "usage": usage}

    def _stream(self, kind: str, request: dict[str, Any]) -> ChunkStream:
        ids, params = self._build(kind, request)
        stream = ChunkStream()
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        sink = _StreamSink(stream, kind, self.model_uid, len(ids), include_usage)
        sink.start()
        self._ready().submit(Sequence(ids, params, sink))
        return stream

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("chat", request)

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        return self._stream("chat", request)

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """The prompt a chat call would build from ``request`` (same template, same tokenizer), counted."""
        self._ready()
        return len(await asyncio.to_thread(self._prompt_ids, "chat", request))

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("completions", request)

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        return self._stream("completions", request)
