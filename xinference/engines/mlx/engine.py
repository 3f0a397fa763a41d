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

Preference (the matcher takes the first engine of :mod:`xinference.engines.registry` that accepts a model): MLX
comes after llama.cpp and Transformers. On Linux CPUs it is a fallback, accepted only once its env is installed:
measured on 2 cores with SmolLM2-135M, Transformers decodes ~21 tok/s and MLX ~11-15 tok/s, and a GGUF through
llama.cpp is faster than both. On a Mac, models with an mlx spec but no GGUF one go to MLX, and a launch can name
it (``-en MLX``) for pytorch weights when Transformers is installed too.

Requests: the chat template is rendered in the project's sandbox (:mod:`xinference.model.chat_template`: the family
JSON's, else the tokenizer's), tokens are decoded by :mod:`.scheduler` (continuous batching with mlx-lm's batch
generator), sampling is :mod:`.sampling`. ``tools`` and ``response_format`` are refused with a 400 until
grammar-constrained decoding is wired in; ``logprobs`` likewise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from xinference.engines import envs
from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.envs import EnvRecipe
from xinference.engines.mlx.config import MLXConfig, ResolvedMLXConfig
from xinference.engines.mlx.runtime import find_openblas, load_model, preload_openblas
from xinference.engines.mlx.sampling import SamplingParams, make_processors, make_sampler
from xinference.engines.mlx.scheduler import Scheduler, Sequence
from xinference.errors import (
    ContextLengthExceeded,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    UnsupportedOption,
    XinferenceError,
)
from xinference.model.chat_template import find_chat_template, render

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["MIN_MLX_LM", "MLXEngine"]

logger = logging.getLogger(__name__)

#: ``generate_step`` with sampler and logits processors, and ``load(model_config=...)``.
MIN_MLX_LM = "0.20.0"
#: Request fields this engine cannot honour yet; each is a 400 naming it.
_UNSUPPORTED = {
    "tools": "tool calls are not supported by the MLX engine yet; use llama.cpp",
    "response_format": "response_format (JSON output) is not supported by the MLX engine yet; use llama.cpp",
    "logprobs": "logprobs are not supported by the MLX engine",
    "top_logprobs": "logprobs are not supported by the MLX engine",
}


class _StreamSink:
    """Turns a sequence's text into chunks pushed to a ChunkStream (called on the scheduler thread)."""

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
        kind = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.uid, "choices": choices}

    def _choice(self, text: str | None, finish: str | None) -> dict[str, Any]:
        if self.kind == "chat":
            return {"index": 0, "delta": {} if text is None else {"content": text}, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def start(self) -> None:
        if self.kind == "chat":
            self.stream.push(self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                                           "finish_reason": None}]))

    def on_text(self, seq: Sequence, text: str) -> None:
        self.stream.push(self._chunk([self._choice(text, None)]))

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.stream.push(self._chunk([self._choice(None, reason)]))
        if self.include_usage:
            last = self._chunk([])
            last["usage"] = _usage(self.prompt_tokens, len(seq.generated))
            self.stream.push(last)
        self.stream.finish()

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.stream.finish(error)


class _CollectSink:
    """Collects a whole completion and resolves a future on the actor's loop (called on the scheduler thread)."""

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


def _logit_bias(raw: Any) -> tuple[tuple[int, float], ...]:
    """OpenAI's ``{"token id": bias}`` as pairs; a key that is not a token id is a 400."""
    if not raw:
        return ()
    pairs = []
    for key, value in dict(raw).items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise InvalidRequest(f"logit_bias keys must be token ids, got {key!r}", param="logit_bias") from None
        pairs.append((token, max(-100.0, min(100.0, float(value)))))
    return tuple(pairs)


class MLXEngine(Engine):
    """LLMs through mlx-lm in the model process, with continuous batching."""

    name: ClassVar[str] = "MLX"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"mlx", "pytorch"})
    continuous_batching: ClassVar[bool] = True
    config_class = MLXConfig

    resolved: ResolvedMLXConfig
    _scheduler: Scheduler | None = None
    _tokenizer: Any = None
    _template: str | None = None
    _stop_token_ids: frozenset[int] = frozenset()
    #: the BLAS mlx uses in this process: a path to OpenBLAS, or "mlx" (the wheel's own)
    blas: str = "mlx"

    # -- environment and fit -----------------------------------------------------------------------------------
    @classmethod
    def platform_verdict(cls, hardware: HardwareInfo) -> Verdict:
        """Apple silicon (Metal), or Linux on x86_64/arm64 (the ``mlx[cpu]`` wheels)."""
        if hardware.is_apple_silicon or (hardware.os == "linux" and hardware.arch in ("x86_64", "arm64")):
            return Verdict.ok()
        return Verdict.reject(f"MLX runs on macOS with Apple silicon or on Linux CPUs; this worker is "
                              f"{hardware.os} {hardware.arch}")

    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        if hardware.is_apple_silicon:
            return EnvRecipe(("mlx", f"mlx-lm>={MIN_MLX_LM}"), overlay=True)
        if cls.platform_verdict(hardware):
            return EnvRecipe(("mlx[cpu]", f"mlx-lm>={MIN_MLX_LM}"), overlay=True)
        return None

    @classmethod
    def process_env(cls, hardware: HardwareInfo) -> dict[str, str]:
        """``LD_PRELOAD`` of the system's OpenBLAS on Linux, when installed (see :mod:`.runtime`)."""
        if hardware.os != "linux":
            return {}
        path = find_openblas()
        return {"LD_PRELOAD": str(path)} if path is not None else {}

    @classmethod
    def check_lib(cls) -> Verdict:
        return envs.check_engine_lib(cls.name, "mlx_lm", "mlx-lm", MIN_MLX_LM)

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        where = cls.platform_verdict(hardware)
        return where if not where else super().match(family, spec, hardware)

    # -- life cycle --------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, MLXConfig)
        self.resolved = cfg = self.config.resolve(cpu_count=self.hardware.cpu_count,
                                                  metal=self.hardware.is_apple_silicon,
                                                  context_length=self.family.context_length)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local: never reach for the hub
        blas = preload_openblas(cfg.n_threads) if self.hardware.os == "linux" else None
        logger.info("loading %s with MLX (BLAS: %s): %s", self.model_uid, blas or "mlx's own",
                    cfg.model_dump())
        try:
            import mlx_lm  # noqa: F401
        except ImportError as exc:
            raise LaunchFailed(f"MLX needs mlx and mlx-lm in this model process (install them with "
                               f"`xinference engine install MLX`): {exc}") from exc
        scheduler = Scheduler(self._load_model, max_num_seqs=cfg.max_num_seqs,
                              prefill_step_size=cfg.prefill_step_size, name=f"mlx-{self.model_uid}")
        scheduler.start()
        try:
            await asyncio.to_thread(scheduler.wait_loaded)
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"MLX could not load {self.model_uid}: {type(exc).__name__}: {exc}") from exc
        self._tokenizer = scheduler.tokenizer
        self._template = find_chat_template(self.family, self.model_path)
        self._stop_token_ids = self._collect_stop_ids(scheduler.tokenizer)
        self._scheduler = scheduler
        self.blas = str(blas) if blas else "mlx"

    def _load_model(self) -> tuple[Any, Any]:
        model, tokenizer, overrides = load_model(self.model_path, trust_remote_code=self.resolved.trust_remote_code)
        if overrides:
            logger.info("%s: config values mlx-lm would miss, passed explicitly: %s", self.model_uid, overrides)
        return model, tokenizer

    def _collect_stop_ids(self, tokenizer: Any) -> frozenset[int]:
        ids: set[int] = set(self.family.stop_token_ids)
        ids.update(int(t) for t in (getattr(tokenizer, "eos_token_ids", None) or ()))
        eos = getattr(tokenizer, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        for text in self.family.stop:
            token = tokenizer.convert_tokens_to_ids(text)
            if isinstance(token, int) and token != getattr(tokenizer, "unk_token_id", None):
                ids.add(token)
        return frozenset(ids)

    async def unload(self) -> None:
        if self._scheduler is not None:
            scheduler, self._scheduler = self._scheduler, None
            await asyncio.to_thread(scheduler.stop)

    def stats(self) -> dict[str, Any]:
        if self._scheduler is None:
            return {}
        return {**self._scheduler.stats(), "blas": self.blas}

    def _ready(self) -> Scheduler:
        if self._scheduler is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._scheduler

    # -- requests ----------------------------------------------------------------------------------------------
    def _prompt_ids(self, kind: str, request: dict[str, Any]) -> list[int]:
        tokenizer = self._tokenizer
        if kind == "completions":
            return list(tokenizer.encode(request["prompt"]))
        if self._template is None:
            raise InvalidRequest(f"model {self.model_uid!r} has no chat template; use /v1/completions",
                                 param="messages")
        variables: dict[str, Any] = {"bos_token": tokenizer.bos_token or "", "eos_token": tokenizer.eos_token or ""}
        variables.update(request.get("chat_template_kwargs") or {})
        text = render(self._template, request["messages"], add_generation_prompt=True, **variables)
        return list(tokenizer.encode(text, add_special_tokens=False))

    def _params(self, request: dict[str, Any], prompt_len: int) -> SamplingParams:
        for name, why in _UNSUPPORTED.items():
            if request.get(name):
                raise UnsupportedOption(why, param=name)
        limit = self.resolved.max_model_len
        room = limit - prompt_len
        if room < 1:
            raise ContextLengthExceeded(
                f"the prompt is {prompt_len} tokens but this model's context holds {limit} tokens; shorten the "
                "prompt or relaunch the model with a larger max_model_len", param="messages")
        stops = tuple(dict.fromkeys([*self.family.stop, *(request.get("stop") or [])]))
        temperature = request.get("temperature")
        top_k = int(request.get("top_k") or 0)
        return SamplingParams(
            max_tokens=min(int(request.get("max_tokens") or room), room),
            temperature=1.0 if temperature is None else float(temperature),
            top_p=float(request.get("top_p") or 1.0),
            top_k=max(0, top_k),
            min_p=float(request.get("min_p") or 0.0),
            seed=request.get("seed"),
            repetition_penalty=float(request.get("repeat_penalty") or 1.0),
            presence_penalty=float(request.get("presence_penalty") or 0.0),
            frequency_penalty=float(request.get("frequency_penalty") or 0.0),
            logit_bias=_logit_bias(request.get("logit_bias")),
            stop=tuple(s for s in stops if s),
            stop_token_ids=frozenset() if request.get("ignore_eos") else self._stop_token_ids,
        )

    def _sequence(self, kind: str, request: dict[str, Any], sink: Any) -> Sequence:
        self._ready()
        ids = self._prompt_ids(kind, request)
        params = self._params(request, len(ids))
        return Sequence(ids, params, sink, sampler=make_sampler(params), processors=make_processors(params))

    async def _complete(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        sink = _CollectSink(asyncio.get_running_loop())
        seq = self._sequence(kind, request, sink)
        scheduler = self._ready()
        scheduler.submit(seq)
        try:
            text = await sink.future
        except asyncio.CancelledError:
            sink.cancelled = True  # the caller went away: the sequence leaves the batch at its next token
            scheduler.wake()
            raise
        usage = _usage(len(seq.prompt_ids), len(seq.generated))
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
        stream = ChunkStream()
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        sink = _StreamSink(stream, kind, self.model_uid, 0, include_usage)
        seq = self._sequence(kind, request, sink)
        sink.prompt_tokens = len(seq.prompt_ids)
        sink.start()
        self._ready().submit(seq)
        return stream

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("chat", request)

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        return self._stream("chat", request)

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._complete("completions", request)

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        return self._stream("completions", request)
