"""llama.cpp through ``xllamacpp``: GGUF models with continuous batching over ``n_parallel`` slots.

``xllamacpp.Server`` runs llama.cpp's own server loop in-process and answers OpenAI-shaped JSON through
``handle_chat_completions``/``handle_completions``. Each call blocks its calling thread until the request ends, so
every request runs on a thread of this engine's pool while llama.cpp batches the slots together; streamed chunks
are handed to the model actor through a :class:`ChunkStream` without waiting on it.

The server also opens llama.cpp's HTTP port. It is bound to loopback and locked with a random API key that never
leaves this process, so nothing but this adapter can use it. Its metrics endpoint is on for ``handle_metrics``, the
in-process reading behind :meth:`LlamaCppEngine.stats` (see ``slots.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import secrets
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

import httpx

from xinference import settings
from xinference.engines.answers import served_embeddings_answer
from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.envs import EnvRecipe
from xinference.engines.grammar import forced_tool_choice, forced_tool_schema
from xinference.engines.libraries import LLAMA_CPP_HINT
from xinference.engines.llama_cpp.config import (
    GpuLayers,
    LlamaCppConfig,
    ResolvedLlamaCppConfig,
    estimate_gpu_layers,
    kv_bytes_per_layer,
)
from xinference.engines.llama_cpp.params_tree import load_tree
from xinference.engines.llama_cpp.pooling import (
    choose_pooling,
    embed_body,
    rerank_body,
    rerank_response,
    sequence_limit,
)
from xinference.engines.llama_cpp.slots import ServerCounters, SlotLoad
from xinference.engines.llama_cpp.speculative import SpeculationCounters, plan_speculation
from xinference.engines.llama_cpp.vision import check_projector, has_images, image_messages, without_image_data
from xinference.engines.memory import MemoryEstimate, local_weights_file, projector_bytes
from xinference.errors import (
    ContextLengthExceeded,
    EngineError,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    UnsupportedOption,
    XinferenceError,
)
from xinference.model.chat_template import find_chat_template
from xinference.model.gguf_info import gguf_info_of
from xinference.model.parsers.postprocess import (
    BARE_JSON_CALLS,
    ChatOutputParser,
    ChunkRewriter,
    thinking_enabled,
)
from xinference.model.parsers.registry import reasoning_tags_of
from xinference.model.parsers.tool_prompt import with_tools
from xinference.model.prompt_render import RenderLimits, TemplateLimitExceeded, check_template_kwargs, render

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["LlamaCppEngine", "error_from_llama"]

logger = logging.getLogger(__name__)


#: Request fields passed to llama.cpp (OpenAI names plus llama.cpp sampling extensions); anything else the API
#: accepted is not forwarded.
_FORWARDED = (
    "messages",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "chat_template_kwargs",
    "ignore_eos",
    "stream",
    "stream_options",
)


def _role_chunk_content(chunk: dict[str, Any]) -> None:
    """llama.cpp opens a chat stream with ``{"role": "assistant", "content": null}``; OpenAI and Xinference send
    ``""`` there, and clients that concatenate ``delta["content"]`` (LlamaIndex, Dify's older code) break on null."""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if (
            isinstance(delta, dict)
            and "role" in delta
            and delta.get("content", "") is None
            and not delta.get("tool_calls")
        ):
            delta["content"] = ""


def error_from_llama(error: dict[str, Any]) -> XinferenceError:
    """Turn llama.cpp's error object into the platform's error class, with a message a user can act on."""
    message = str(error.get("message", "llama.cpp error"))
    kind = error.get("type")
    if kind == "exceed_context_size_error":
        prompt, ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        return ContextLengthExceeded(
            f"the prompt is {prompt} tokens but this model's context holds {ctx} tokens; shorten the prompt or "
            f"relaunch the model with a larger n_ctx",
            param="messages",
        )
    if "too large to process" in message:  # an embedding or rerank input longer than one pass (its positions)
        return ContextLengthExceeded(
            f"an input is longer than this model takes in one pass ({message.split('.', 1)[0]}); shorten it",
            param="input",
        )
    code = error.get("code")
    if code == 400 or kind == "invalid_request_error":
        return InvalidRequest(message)
    if code == 503 or kind == "unavailable_error":
        return ModelUnavailable(message)
    return EngineError(f"llama.cpp failed: {message}")


def _llama_json(response: httpx.Response) -> dict[str, Any]:
    """The JSON of one of llama.cpp's own HTTP endpoints; its error object becomes the platform's error."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise EngineError(f"llama.cpp answered HTTP {response.status_code} without a JSON object")
    if "error" in body:
        raise error_from_llama(body["error"] if isinstance(body["error"], dict) else {"message": body["error"]})
    return body


@contextlib.contextmanager
def _backend_errors() -> Iterator[None]:
    """Translate what xllamacpp raises on bad input (ValueError) or failure into the platform's errors."""
    try:
        yield
    except XinferenceError:
        raise
    except ValueError as exc:  # xllamacpp's word for bad input; a TypeError is a bug on this side (below)
        raise InvalidRequest(f"llama.cpp rejected the request: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes an EngineError
        raise EngineError(f"llama.cpp failed: {exc}") from exc


class LlamaCppEngine(Engine):
    """GGUF models on CPU or GPU through llama.cpp."""

    name: ClassVar[str] = "llama.cpp"
    model_types: ClassVar[frozenset[str]] = frozenset({"LLM", "embedding", "rerank"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"ggufv2"})
    continuous_batching: ClassVar[bool] = True
    reads_images: ClassVar[bool] = True  # with the spec's multimodal projector (:mod:`.vision`)
    config_class = LlamaCppConfig
    context_option: ClassVar[str | None] = "n_ctx"
    spills_to_ram: ClassVar[bool] = True  # layers that do not fit in VRAM run on the CPU

    _server: Any
    _pool: ThreadPoolExecutor | None = None
    _http: httpx.AsyncClient | None = None
    _http_loop: asyncio.AbstractEventLoop | None = None
    _speculation: SpeculationCounters
    _load: SlotLoad | None = None
    _counters: ServerCounters | None = None
    _api_key: str = ""
    _template: str | None = None  # the chat template, read at the first request of a reasoning family
    #: embedding and rerank models: llama.cpp's pooling (None for a generative model) and the vectors' size
    _pooling: str | None = None
    _dimensions: int = 0
    #: whether llama.cpp loaded a multimodal projector (the model sees images)
    _vision: bool = False
    resolved: ResolvedLlamaCppConfig

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        """The default checks, with a sentence naming the model type for embedding and rerank models."""
        if family.model_type in ("embedding", "rerank") and spec.model_format != "ggufv2":
            return Verdict.reject(f"llama.cpp serves {family.model_type} models only in GGUF, not {spec.model_format}")
        return super().match(family, spec, hardware)

    @classmethod
    def estimate_memory(
        cls,
        family: ModelFamily,
        spec: ModelSpec,
        quantization: str,
        engine_kwargs: dict[str, Any],
        hardware: HardwareInfo,
    ) -> MemoryEstimate:
        """The default estimate, with the KV cache read off the GGUF header when the file is on this machine (a
        bundled or ``file://`` model): the guess from the parameter count is off by 2x or more for models with many
        layers and few KV heads (SmolLM2-135M holds 23 KiB per token; the guess was 11), which let a launch the
        machine cannot hold past the check and fail inside llama.cpp instead. A vision model's projector (the
        ``projector`` option, set from the launch's ``multimodal_projector``) counts too: 0.2-1.8 GB."""
        estimate = super().estimate_memory(family, spec, quantization, engine_kwargs, hardware)
        projector = engine_kwargs.get("projector")
        if isinstance(projector, str) and projector:  # the booking passes the launch's projector here
            estimate = dataclasses.replace(estimate, projector=projector_bytes(spec, quantization, projector))
        path = local_weights_file(spec, quantization) if family.model_type == "LLM" else None
        if path is None:
            return estimate
        try:
            info = gguf_info_of(path)
        except (OSError, ValueError, struct.error):
            return estimate
        k_type, v_type = engine_kwargs.get("cache_type_k"), engine_kwargs.get("cache_type_v")
        per_layer = kv_bytes_per_layer(
            info,
            estimate.context,
            k_type.lower() if isinstance(k_type, str) else None,
            v_type.lower() if isinstance(v_type, str) else None,
        )
        return dataclasses.replace(estimate, kv_cache=info.block_count * per_layer)

    @classmethod
    def env_recipe(cls, hardware: HardwareInfo) -> EnvRecipe | None:
        """A GPU build of xllamacpp from ``XINFERENCE_LLAMA_CPP_INDEX_URL`` on CUDA workers; None (the main
        environment's build) otherwise.

        PyPI's CPU wheels carry the same version numbers as the GPU ones, so that index is the only one pip reads
        (``--index-url``, not ``--extra-index-url``, which could pick the CPU wheel), and the main environment's
        CPU build, visible through the overlay, is ignored. xllamacpp has no dependencies.
        """
        url = settings.llama_cpp_index_url()
        if url is None or not hardware.cuda_available:
            return None
        return EnvRecipe(("xllamacpp",), overlay=True, pip_args=("--index-url", url, "--ignore-installed", "--no-deps"))

    async def load(self) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            raise LaunchFailed(f"llama.cpp needs the xllamacpp package ({LLAMA_CPP_HINT}): {exc}") from exc
        assert isinstance(self.config, LlamaCppConfig)
        self._speculation = SpeculationCounters()
        context_length = await asyncio.to_thread(self._plan_pooling)
        resolved = self.config.resolve(
            cpu_count=self.hardware.cpu_count,
            context_length=context_length,
            gpu=bool(self.hardware.gpus),
            pooled=self._pooling is not None,
        )
        auto = await asyncio.to_thread(self._auto_gpu_layers, resolved)
        if auto is not None:
            resolved = resolved.model_copy(update={"n_gpu_layers": auto.layers, "gpu_offload": auto.note})
        tree = load_tree()
        assert tree is not None  # xllamacpp imports here
        # Validated again in this process: the supervisor may have checked them without xllamacpp.
        resolved = resolved.model_copy(update={"params": tree.validate(resolved.params)})
        extra, speculative = await asyncio.to_thread(plan_speculation, resolved, self.model_path)
        vision = await asyncio.to_thread(self._plan_vision, resolved)
        params = self._build_params(xllamacpp, resolved)
        tree.apply(params, {**resolved.params, **extra})
        # What llama.cpp's parameters now hold, read back: the launch result shows the values really used.
        self.resolved = resolved.model_copy(
            update={
                "params": {path: tree.read(params, path) for path in resolved.params},
                "speculative": speculative,
                "vision": vision,
            }
        )
        logger.info("loading %s with llama.cpp: %s", self.model_uid, self.resolved.model_dump())
        try:
            self._server = await asyncio.to_thread(xllamacpp.Server, params)
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            hint = ""
            if self._vision:  # llama.cpp checks the projector against the model only now, as it loads both
                hint = (
                    f" (the multimodal projector {vision} may not belong to this model: its output must match the "
                    "model's embedding width; the replica log has llama.cpp's reason)"
                )
            raise LaunchFailed(f"llama.cpp could not load {self.model_uid}: {exc}{hint}") from exc
        # Threads beyond the slots wait inside llama.cpp's own queue, where an abort still reaches them.
        self._pool = ThreadPoolExecutor(
            max_workers=max(16, self.resolved.n_parallel * 4), thread_name_prefix=f"llama-{self.model_uid}"
        )
        self._load = SlotLoad(self.resolved.n_parallel)
        self._counters = ServerCounters(self._server.handle_metrics, self.model_uid)

    def _plan_pooling(self) -> int | None:
        """For an embedding or rerank model: its pooling and vector size from the GGUF header (LaunchFailed when
        it cannot be served so), and the tokens of one input; for a generative model, its context length."""
        assert isinstance(self.config, LlamaCppConfig)
        if self.family.model_type not in ("embedding", "rerank"):
            pooled = {"pooling_type": self.config.pooling_type, "normalize": not self.config.normalize or None}
            for option, value in pooled.items():
                if value:
                    raise LaunchFailed(f"{option} applies to embedding models; {self.model_uid} is a chat model")
            return self.family.context_length
        from xinference.model.gguf_info import read_gguf_info

        try:
            info = read_gguf_info(self.model_path)
        except (OSError, ValueError) as exc:
            raise LaunchFailed(f"llama.cpp could not read {self.model_uid}'s GGUF header: {exc}") from exc
        self._pooling = choose_pooling(self.family.model_type, self.config.pooling_type, info, self.model_uid)
        self._dimensions = info.n_embd
        return sequence_limit(info, self.family.max_tokens)

    def _plan_vision(self, cfg: ResolvedLlamaCppConfig) -> str:
        """The projector llama.cpp will load, checked first (LaunchFailed when it is not a vision projector), as
        ``"<file> (<projector type>)"``; empty when the model is launched without one."""
        path = cfg.projector
        if not path:
            return ""
        if self._pooling is not None:
            raise LaunchFailed(f"a multimodal projector applies to chat models; {self.model_uid} is an embedding model")
        kind = check_projector(path, self.model_uid)
        self._vision = True
        return f"{os.path.basename(path)} ({kind})"

    def _auto_gpu_layers(self, cfg: ResolvedLlamaCppConfig) -> GpuLayers | None:
        """Layers that fit in this replica's free VRAM when the user left ``n_gpu_layers`` unset (NVIDIA GPUs;
        Apple silicon shares its memory and keeps every layer on the GPU)."""
        assert isinstance(self.config, LlamaCppConfig)
        if self.config.n_gpu_layers is not None or not self.hardware.cuda_available:
            return None
        from xinference.model.gguf_info import read_gguf_info

        try:
            info = read_gguf_info(self.model_path)
        except (OSError, ValueError) as exc:
            logger.warning(
                "could not read %s's GGUF header to size its GPU layers (%s): offloading all", self.model_uid, exc
            )
            return None
        free = sum(gpu.memory_free_bytes for gpu in self.hardware.gpus if gpu.vendor == "nvidia")
        return estimate_gpu_layers(
            info, free, n_ctx=cfg.n_ctx, cache_type_k=cfg.cache_type_k, cache_type_v=cfg.cache_type_v
        )

    def _build_params(self, xllamacpp: Any, cfg: ResolvedLlamaCppConfig) -> Any:
        params = xllamacpp.CommonParams()
        params.model.path = self.model_path
        params.n_ctx = cfg.n_ctx
        params.n_parallel = cfg.n_parallel
        params.kv_unified = cfg.kv_unified
        params.cpuparams.n_threads = cfg.n_threads
        params.cpuparams_batch.n_threads = cfg.n_threads_batch
        params.n_gpu_layers = cfg.n_gpu_layers
        params.cache_prompt = cfg.cache_prompt
        if cfg.n_batch is not None:
            params.n_batch = cfg.n_batch
        if cfg.n_ubatch is not None:
            params.n_ubatch = cfg.n_ubatch
        params.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[cfg.flash_attn]
        for field in ("cache_type_k", "cache_type_v"):
            value = getattr(cfg, field)
            if value is not None:
                setattr(params, field, getattr(xllamacpp.ggml_type, f"GGML_TYPE_{value.upper()}"))
        # llama.cpp's own HTTP port: loopback only, and a key nobody else knows.
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        self._api_key = secrets.token_urlsafe(32)
        params.api_keys = [self._api_key]
        params.endpoint_metrics = True  # read in-process by stats(); over HTTP only with the key above
        params.endpoint_slots = False
        params.endpoint_props = False
        if self._pooling is not None:
            params.embedding = True
            params.pooling_type = getattr(xllamacpp.llama_pooling_type, f"LLAMA_POOLING_TYPE_{self._pooling.upper()}")
        if self.family.chat_template:
            params.chat_template = self.family.chat_template
        if cfg.projector:
            params.mmproj.path = cfg.projector
            if cfg.n_gpu_layers == 0:
                params.mmproj_use_gpu = False  # a CPU-only model keeps its vision tower on the CPU too
        return params

    def stats(self) -> dict[str, Any]:
        """Polled at scrape time (``/metrics``): the slots (``slots_total``, ``slots_busy``, ``requests_waiting``,
        counted here), llama.cpp's own counters (``prompt_tokens``, ``generation_tokens``, ``decode_calls``, ...;
        see :data:`~xinference.engines.llama_cpp.slots.LLAMA_METRICS`), read with a wait of at most 0.1 s, and,
        when the model drafts, speculative decoding's (``spec_draft_tokens``, ``spec_accepted_tokens``,
        ``spec_acceptance_rate``, ``spec_requests``: requests that drafted) with how it drafts. Empty until loaded."""
        resolved = getattr(self, "resolved", None)
        if resolved is None or self._load is None:
            return {}
        stats: dict[str, Any] = dict(self._load.snapshot())
        if self._counters is not None:
            stats.update(self._counters.snapshot())
        if resolved.speculative.get("types"):
            stats.update(self._speculation.snapshot(), speculative=resolved.speculative)
        return stats

    async def unload(self) -> None:
        if self._http is not None:
            if self._http_loop is asyncio.get_running_loop():
                await self._http.aclose()
            self._http = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._counters is not None:
            self._counters.close()
            self._counters = None
        self._server = None

    # -- serving ------------------------------------------------------------------------------------------------
    def _body(self, request: dict[str, Any], stream: bool) -> dict[str, Any]:
        if self._pooling is not None:  # llama.cpp was started for vectors or scores, not text
            raise self._unsupported("generate text")
        if int(request.get("n") or 1) > 1:
            raise UnsupportedOption(
                "n > 1 (several choices per request) is not supported by llama.cpp; send n requests", param="n"
            )
        body = {key: request[key] for key in _FORWARDED if request.get(key) is not None}
        check_template_kwargs(body.get("chat_template_kwargs"))  # llama.cpp's template gets them too
        if request.get("enable_thinking") is not None:
            body["chat_template_kwargs"] = {
                **(body.get("chat_template_kwargs") or {}),
                "enable_thinking": thinking_enabled(request),
            }
        body["stream"] = stream
        if not stream:
            body.pop("stream_options", None)
        return body

    def _primed(self, body: dict[str, Any]) -> bool:
        """Whether the prompt of ``body`` ends inside a reasoning block (a template that writes ``<think>`` itself,
        as DeepSeek-R1's does): the output then has no opening tag and is reasoning from its first token.

        Only for families that declare reasoning. llama.cpp renders the prompt in C++; the same template is rendered
        here by the platform's renderer to find out, and a template that fails here counts as "cannot tell",
        except when it exceeds the renderer's limits: that request is a 400, as on every engine.
        """
        tags = reasoning_tags_of(self.family)
        if tags is None:
            return False
        if self._template is None:
            self._template = find_chat_template(self.family, self.model_path) or ""
        if not self._template:
            return False
        try:
            prompt = render(
                self._template,
                without_image_data(body["messages"]),  # the template only places images; their bytes stay out
                special_tokens={"bos_token": "", "eos_token": ""},
                template_kwargs=body.get("chat_template_kwargs"),
                limits=RenderLimits.for_context(self.resolved.n_ctx),
            )
        except TemplateLimitExceeded:
            raise
        except XinferenceError:
            return False
        return prompt.rstrip().endswith(tags.start)

    def _chat_body(self, request: dict[str, Any], stream: bool) -> tuple[dict[str, Any], ChatOutputParser | None]:
        """The body for llama.cpp and the parser of its output.

        A forced ``tool_choice`` (``required`` or a named function) is guaranteed through llama.cpp's own grammar:
        the call becomes a ``json_schema`` response format built from the tools' parameters, the tools are
        described in the system message (a template may not render them), and the JSON that comes back is parsed
        into ``tool_calls``. Otherwise llama.cpp parses what its template knows natively, and the family's parsers
        handle the rest.
        """
        body = self._body(request, stream)
        forced, name = forced_tool_choice(request.get("tool_choice"))
        if not forced:
            return body, ChatOutputParser.for_request(self.family, request, primed=self._primed(body))
        tools = request.get("tools") or []
        if not tools:
            raise InvalidRequest("tool_choice forces a call but no tools were given", param="tool_choice")
        if request.get("response_format"):
            raise InvalidRequest("response_format cannot be combined with a forced tool_choice", param="tool_choice")
        schema = forced_tool_schema(tools, name)
        for key in ("tools", "tool_choice", "parallel_tool_calls"):
            body.pop(key, None)
        body["messages"] = with_tools(body["messages"], tools)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": schema, "strict": True},
        }
        return body, ChatOutputParser.for_request(self.family, request, tool_format=BARE_JSON_CALLS)

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streamed request, sent to llama.cpp's own server on its locked loopback port rather than through
        the in-process handler: when this call is cancelled (the client went away), the connection closes and
        llama.cpp cancels the task within its one-second poll of the connection, which the in-process handler cannot
        do (it runs to ``max_tokens``)."""
        self._executor()  # ModelUnavailable once unloaded
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:  # one client per event loop (tests run several)
            self._http = httpx.AsyncClient(
                base_url=str(self._server.listening_address),
                timeout=None,
                headers={"Authorization": f"Bearer {self._api_key}"},
            )
            self._http_loop = loop
        assert self._load is not None
        try:
            with self._load.running():
                response = await self._http.post(path, json=body)
        except httpx.HTTPError as exc:
            raise EngineError(f"llama.cpp failed: {type(exc).__name__}: {exc}") from exc
        result = _llama_json(response)
        result["model"] = self.model_uid
        self._speculation.note(result.pop("timings", None))
        return result

    def _start(
        self, handler: Callable[..., Any], body: dict[str, Any], rewriter: ChunkRewriter | None = None
    ) -> ChunkStream:
        stream = ChunkStream()
        uid = self.model_uid
        counters = self._speculation
        pool, load = self._executor(), self._load
        assert load is not None

        first = True
        #: ``"model":<what llama.cpp names it>`` as its chunks spell it (learnt from the first chunk), and ours
        theirs: list[bytes] = []
        ours = b'"model":' + json.dumps(uid, ensure_ascii=False).encode()

        def on_chunk(chunk: dict[str, Any]) -> bool:
            # Runs on the engine thread for every token: keep it tiny. Returning True stops the request.
            nonlocal first
            if stream.cancelled:
                return True
            if "error" in chunk:
                stream.finish(error_from_llama(chunk["error"]))
                return True
            if first:
                first = False
                theirs.append(b'"model":' + json.dumps(chunk.get("model"), ensure_ascii=False).encode())
                _role_chunk_content(chunk)
            chunk["model"] = uid
            timings = chunk.pop("timings", None)
            if timings is not None:  # the last chunk: draft figures of a speculative request
                counters.note(timings)
            if rewriter is None:
                stream.push(chunk)
            else:  # reasoning and tool calls parsed out of the content
                for out in rewriter.process(chunk):
                    stream.push(out)
            return False

        def on_text(text: bytes) -> bool:
            # xllamacpp's bytes callback: the chunk's JSON text as llama.cpp wrote it, no dict built. A token chunk
            # only needs the model renamed, a byte replace, and goes on as text (see ``engines.base.Chunk``); the
            # first chunk (the role), the last (timings), an error or a chunk spelt otherwise is decoded.
            if stream.cancelled:
                return True
            if theirs and theirs[0] in text and b'"error"' not in text and b'"timings"' not in text:
                stream.push(text.replace(theirs[0], ours, 1))
                return False
            return on_chunk(json.loads(text))

        def run() -> None:
            load.start()
            error: XinferenceError | None = None
            try:
                with _backend_errors():
                    if rewriter is None:  # text in, text out: no dict per token on this thread
                        handler(json.dumps(body).encode(), on_text)
                    else:
                        handler(body, on_chunk)
            except XinferenceError as exc:
                error = exc
            finally:
                load.end()  # before the stream ends: whoever sees the end sees the slot free
            stream.finish(error)

        load.queue()
        try:
            pool.submit(run)
        except RuntimeError as exc:  # the pool shut down between the check above and here: unloading
            load.unqueue()
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded") from exc
        return stream

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._server is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._pool

    async def _with_images(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` with its image parts as llama.cpp reads them (see ``vision.py``); unchanged without images."""
        messages = request.get("messages")
        if not has_images(messages):
            return request
        assert isinstance(messages, list)
        converted = await asyncio.to_thread(image_messages, messages, projector=self._vision, model_uid=self.model_uid)
        return {**request, "messages": converted}

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        request = await self._with_images(request)
        body, parser = self._chat_body(request, stream=False)
        result = await self._call("/v1/chat/completions", body)
        return parser.fix_response(result) if parser is not None else result

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        request = await self._with_images(request)
        body, parser = self._chat_body(request, stream=True)
        return self._start(self._server.handle_chat_completions, body, parser.stream() if parser else None)

    async def count_tokens(self, request: dict[str, Any]) -> int:
        """Rendered by llama.cpp's own chat-template code (``/apply-template``) and tokenized as a chat prompt is
        (``/tokenize``), on the loopback port this adapter locked with its key: the ``prompt_tokens`` a chat call
        with the same messages and tools reports. A prompt with images is counted by llama.cpp itself, from a
        one-token chat call (only the vision tower knows how many tokens an image becomes)."""
        pool = self._executor()
        request = await self._with_images(request)
        body, _ = self._chat_body(request, stream=False)  # a forced tool call rewrites the prompt: count that one
        if has_images(body.get("messages")):
            result = await self._call("/v1/chat/completions", {**body, "max_tokens": 1})
            return int((result.get("usage") or {}).get("prompt_tokens") or 0)
        address = str(self._server.listening_address)
        key = self._api_key

        def run() -> int:
            with httpx.Client(base_url=address, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
                rendered = _llama_json(client.post("/apply-template", json=body))
                tokens = _llama_json(
                    client.post(
                        "/tokenize",
                        json={"content": rendered.get("prompt", ""), "add_special": True, "parse_special": True},
                    )
                )
            return len(tokens.get("tokens") or [])

        with _backend_errors():
            return await asyncio.get_running_loop().run_in_executor(pool, run)

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._call("/v1/completions", self._body(request, stream=False))

    # -- embedding and rerank models ----------------------------------------------------------------------------
    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        """One vector per input (strings or token-id lists), pooled as the model was launched; see ``pooling.py``."""
        if self.family.model_type != "embedding" or self._pooling is None:
            raise self._unsupported("embed")
        assert isinstance(self.config, LlamaCppConfig)
        body = embed_body(request, self.config.normalize, self._dimensions)
        result = await self._pooled("handle_embeddings", body)
        return served_embeddings_answer(result, self.model_uid, request.get("encoding_format"))

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        """Every document scored against the query through the model's classification head, best first."""
        if self.family.model_type != "rerank" or self._pooling is None:
            raise self._unsupported("rerank")
        assert isinstance(self.config, LlamaCppConfig)
        documents = list(request["documents"])
        result = await self._pooled("handle_rerank", rerank_body(request))
        return rerank_response(
            result, documents, request.get("top_n"), bool(request.get("return_documents")), self.config.score_activation
        )

    async def _pooled(self, handler_name: str, body: dict[str, Any]) -> dict[str, Any]:
        """One embeddings or rerank call into llama.cpp (``Server.<handler_name>``) on a thread of the pool: each
        input becomes one of llama.cpp's tasks, and the tasks of every concurrent call share its forward passes."""
        pool = self._executor()  # ModelUnavailable once unloaded
        handler: Callable[[dict[str, Any]], Any] = getattr(self._server, handler_name)
        assert self._load is not None
        with self._load.running(), _backend_errors():
            result = await asyncio.get_running_loop().run_in_executor(pool, handler, body)
        if not isinstance(result, dict):
            raise EngineError(f"llama.cpp answered {type(result).__name__} instead of a JSON object")
        if "error" in result:
            error = result["error"]
            raise error_from_llama(error if isinstance(error, dict) else {"message": str(error)})
        return result

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        return self._start(self._server.handle_completions, self._body(request, stream=True))
