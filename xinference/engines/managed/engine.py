"""The managed-server runner shared by the engines that serve through their own OpenAI server (vLLM, SGLang).

Why a server and not the library in-process: vLLM and SGLang pin torch, transformers and CUDA stacks of their own,
so they live in an environment of their own (:mod:`xinference.engines.envs`) whose Python is not ours; their
OpenAI server is the stable interface across that boundary. The engine folder says *what* to start (argument
names, environment, match rules); this module owns *how*:

- **start**: the server runs as a child of the model process, in a process group of its own, on a free loopback
  port, locked with a random API key nobody else knows; its stdout/stderr go to the model's log.
- **ready**: ``/health`` is polled, with a stage the launch progress shows; a server that exits or never gets
  ready fails the launch with what it printed last.
- **serve**: chat and completions are proxied; streamed answers are read event by event
  (:mod:`xinference.engines.managed.sse`). An event that is already the platform's chunk but for a few bytes (the
  server names the model by its uid, as it is launched with ``served_model_name``; no ``reasoning`` field to rename;
  vLLM's null vendor fields cut out by a byte replace) is pushed into the :class:`ChunkStream` as its JSON text,
  never decoded here or in the API (see ``engines.base.Chunk``); any other event (an error, a reasoning delta, a
  field written another way) is parsed once and normalised as a dict.
  The server's error bodies become the platform's error classes. A cancelled stream closes its connection, which
  makes the server abort the request.
- **watch**: ``check_health()`` (polled by the worker) raises EngineError when the server died or has not answered
  ``/health`` for :data:`HUNG_AFTER_S`.
- **stop**: SIGTERM to the whole group, SIGKILL after a bound. A small watchdog process holds the read end of a
  pipe from the model process: when the model process disappears for any reason, kill -9 included, the pipe closes
  and the watchdog kills the group and every descendant it has seen, so no engine process outlives its model
  process holding memory or a GPU (:mod:`xinference.engines.managed.process`).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from xinference.engines import envs
from xinference.engines.answers import served_embeddings_answer
from xinference.engines.base import ChunkStream, Engine, Verdict
from xinference.engines.managed.pooling import embed_request, rerank_answer, rerank_request
from xinference.engines.managed.process import ServerProcess, free_loopback_port, scrub
from xinference.engines.managed.sse import SSEResponse, open_sse
from xinference.engines.managed.tools import ForcedToolCall, forced_tool_call
from xinference.engines.managed.vision import openai_image_messages
from xinference.errors import (
    ContextLengthExceeded,
    EngineError,
    InvalidRequest,
    LaunchFailed,
    ModelUnavailable,
    UnsupportedOption,
    XinferenceError,
)
from xinference.model.parsers.postprocess import thinking_enabled
from xinference.model.parsers.registry import reasoning_tags_of, tool_call_format_of
from xinference.model.prompt_render import check_template_kwargs

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily

__all__ = [
    "HUNG_AFTER_S",
    "ManagedServerEngine",
    "cuda_linux_verdict",
    "error_from_server",
    "parse_metrics",
    "reasoning_style",
    "tool_format_name",
    "server_template_kwargs",
    "visible_gpu_count",
]

logger = logging.getLogger(__name__)

#: A server that has not answered ``/health`` for this long is considered hung (a busy CPU server can be slow to
#: answer a few probes; a hung one never does).
HUNG_AFTER_S = 60.0
_CONTEXT_OVERFLOW = re.compile(
    r"maximum context length|context length \(|longer than the model'?s context|max_model_len|"
    r"maximum model length|exceeds the context",
    re.IGNORECASE,
)
#: vLLM-only fields that come back as null on every answer and mean nothing to an OpenAI client
_VENDOR_NULLS = (
    "token_ids",
    "routed_experts",
    "stop_reason",
    "prompt_logprobs",
    "prompt_token_ids",
    "kv_transfer_params",
)
#: ``reasoning_effort`` values the servers also take at the top level (gpt-oss reads them there); they may refuse others
_NATIVE_EFFORTS = ("low", "medium", "high")


def _cause(server: ServerProcess) -> str:
    """``": <the first exception line of the server's log>"``, or nothing: the line that says why a server failed
    is printed long before the traceback tail the last lines show (see :func:`managed_process.root_cause`)."""
    found = server.root_cause()
    return f": {found}" if found else ""


def cuda_linux_verdict(engine: str, hardware: HardwareInfo) -> Verdict:
    """Accepted on Linux with at least one NVIDIA GPU; otherwise the sentence a user reads."""
    if hardware.os == "linux" and hardware.cuda_available:
        return Verdict.ok()
    if hardware.os != "linux":
        where = "macOS" if hardware.os == "darwin" else (hardware.os or "an unknown OS")
        return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker runs {where}")
    return Verdict.reject(f"{engine} needs a CUDA GPU on Linux; this worker has none")


def visible_gpu_count(hardware: HardwareInfo) -> int:
    """GPUs this replica may use: those the worker made visible to its process (``CUDA_VISIBLE_DEVICES``), else
    every NVIDIA GPU of the worker; at least 1 (the server's default shard count)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return max(1, len([part for part in visible.split(",") if part.strip()]))
    return max(1, len([gpu for gpu in hardware.gpus if gpu.vendor == "nvidia"]))


#: A family's reasoning tags -> the style a server's reasoning parser is chosen by (``qwen3`` is decided by name)
_STYLE_OF_TAGS: dict[tuple[str, str], str] = {
    ("<think>", "</think>"): "think",
    ("[THINK]", "[/THINK]"): "mistral",
    ("\u25c1think\u25b7", "\u25c1/think\u25b7"): "kimi",
    ("<seed:think>", "</seed:think>"): "seed_oss",
    ("<|channel|>analysis<|message|>", "<|end|>"): "harmony",
    ("<|channel>thought\n", "<channel|>"): "gemma4",
}


def reasoning_style(family: ModelFamily) -> str | None:
    """How the family marks its reasoning, for choosing a server's reasoning parser: ``qwen3`` (``<think>`` tags
    that ``enable_thinking: false`` turns off), ``think`` (other ``<think>`` tags, the opening one possibly left
    out by the template), ``mistral`` (``[THINK]``), ``kimi``, ``seed_oss``, ``harmony`` (gpt-oss's channels),
    ``gemma4``, or None (no reasoning, or tags no server knows)."""
    tags = reasoning_tags_of(family)
    if tags is None:
        return None
    style = _STYLE_OF_TAGS.get((tags.start, tags.end))
    if style == "think" and family.model_name.lower().startswith("qwen3"):
        return "qwen3"
    return style


def tool_format_name(family: ModelFamily) -> str | None:
    """The canonical name of the family's tool-call format (an alias such as Xinference's ``qwen`` or vLLM's
    ``glm47`` resolved), for choosing a server's tool-call parser; None when it declares none."""
    fmt = tool_call_format_of(family)
    return fmt.name if fmt is not None else None


def error_from_server(engine: str, status: int, body: bytes | str) -> XinferenceError:
    """The platform's error for an error answer of an engine's OpenAI server (both vLLM's ``{"error": {...}}``
    and the older flat ``{"message", "code"}`` shape). 4xx keep the server's message; context overflow becomes
    ContextLengthExceeded."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    message = text.strip()
    param: str | None = None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        nested = data.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else data
        message = str(error.get("message") or error.get("detail") or message)
        param = error.get("param") if isinstance(error.get("param"), str) else None
    message = scrub(message)[:2000] or f"HTTP {status}"
    if status in (400, 413, 422):
        if _CONTEXT_OVERFLOW.search(message):
            return ContextLengthExceeded(message, param="messages")
        return InvalidRequest(message, param=param)
    if status in (429, 503):
        return ModelUnavailable(f"{engine} is busy: {message}")
    return EngineError(f"{engine} failed (HTTP {status}): {message}")


def server_template_kwargs(request: dict[str, Any]) -> dict[str, Any]:
    """``chat_template_kwargs`` for a vLLM/SGLang server: the request's own (a new dict), plus its top-level
    ``enable_thinking`` (which wins, as everywhere on the platform: :func:`thinking_enabled`) and
    ``reasoning_effort`` (unless the kwargs name one). Why: both servers drop a top-level ``enable_thinking``
    without a word, so a reasoning model would keep thinking; the chat template is where the switch acts.
    Names the renderer sets itself (``messages``, ``bos_token``, ...) are a 400 here, as on every engine
    (:func:`~xinference.model.prompt_render.check_template_kwargs`)."""
    kwargs = dict(request.get("chat_template_kwargs") or {})
    check_template_kwargs(kwargs)
    if request.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = thinking_enabled(request)
    effort = request.get("reasoning_effort")
    if effort is not None:
        kwargs.setdefault("reasoning_effort", effort)
    return kwargs


_METRIC_LINE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str, wanted: set[str], averaged: frozenset[str] = frozenset()) -> dict[str, float]:
    """The ``wanted`` metrics of a Prometheus text page, each summed over its label sets, except those in
    ``averaged`` (fractions such as KV-cache usage, one series per data-parallel engine), which are their mean."""
    values: dict[str, float] = {}
    series: dict[str, int] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        match = _METRIC_LINE.match(line)
        if match is None or match.group(1) not in wanted:
            continue
        try:
            values[match.group(1)] = values.get(match.group(1), 0.0) + float(match.group(2))
        except ValueError:
            continue
        series[match.group(1)] = series.get(match.group(1), 0) + 1
    for name in averaged & values.keys():
        values[name] /= series[name]
    return values


class ManagedServerEngine(Engine):
    """Base of the engines served by their own OpenAI server. Subclasses set the flags and implement
    :meth:`server_args` (and may override :meth:`server_env`, :meth:`translate_request`).

    ``module``/``distribution``/``min_version`` name the backend library, looked for in the engine's env first,
    then in the main environment.
    """

    module: ClassVar[str]
    distribution: ClassVar[str]
    min_version: ClassVar[str | None] = None
    health_path: ClassVar[str] = "/health"
    #: where ``load`` stands, in words (shown with the launch progress)
    stage: str = ""
    #: the random key that locks the server's port (set by ``load``)
    api_key: str = ""
    #: our stat name -> the server's Prometheus metric (summed over its labels), see :meth:`stats`
    metric_names: ClassVar[dict[str, str]] = {}
    #: the server's metrics among :attr:`metric_names` that are fractions: averaged over their label sets, not summed
    averaged_metrics: ClassVar[frozenset[str]] = frozenset()
    _stats: dict[str, float] = {}

    _server: ServerProcess | None = None
    _port: int = 0
    _client: httpx.AsyncClient | None = None
    _temp_dir: tempfile.TemporaryDirectory[str] | None = None

    # -- fit ------------------------------------------------------------------------------------------------------

    @classmethod
    def server_python(cls) -> str:
        """The Python that runs the server: the engine env's, else ours when the library is importable here."""
        python = envs.env_python(cls.name)
        if python is not None:
            return str(python)
        if importlib.util.find_spec(cls.module) is not None:
            return sys.executable
        raise LaunchFailed(
            f"{cls.name} is not installed on this worker; install it with `xinference engine install {cls.name}`"
        )

    # -- what to start (per engine) ------------------------------------------------------------------------------
    @abc.abstractmethod
    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        """The full command line of the server (starting with ``python``)."""

    def server_env(self) -> dict[str, str]:
        """Environment variables for the server on top of ours."""
        return {}

    @property
    def start_timeout_s(self) -> float:
        return float(getattr(self.config, "start_timeout_s", 900.0))

    def temp_file(self, name: str, text: str) -> str:
        """Write ``text`` to a file that lives as long as the server (a chat template, a config) and return its
        path."""
        if self._temp_dir is None:
            self._temp_dir = tempfile.TemporaryDirectory(prefix="xinference-engine-")
        path = Path(self._temp_dir.name) / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        for verdict in (self.match(self.family, self.spec, self.hardware), self.check_lib()):
            if not verdict:
                raise LaunchFailed(f"{self.name} cannot start on this worker: {verdict.reason}")
        python = self.server_python()
        self._port = port = free_loopback_port()
        self.api_key = api_key = secrets.token_hex(24)  # hex: a key starting with "-" would read as an option
        argv = self.server_args(python=python, port=port, api_key=api_key)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.server_env()}
        self.stage = f"starting {self.name}'s server"
        logging.getLogger("httpx").setLevel(logging.WARNING)  # not a log line per proxied request and health check
        self._server = ServerProcess(f"{self.name} server for {self.model_uid}", argv, env)
        await asyncio.to_thread(self._server.start)
        self._client = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx.Timeout(None, connect=10.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.unload()
            raise
        self._last_healthy = time.monotonic()
        self.stage = "ready"

    async def _wait_ready(self) -> None:
        server, client = self._require()
        started = time.monotonic()
        deadline = started + self.start_timeout_s
        while True:
            code = server.returncode()
            if code is not None:
                raise LaunchFailed(
                    f"{self.name}'s server exited with code {code} while starting"
                    f"{_cause(server)}; it printed last:\n{server.tail(5)}"
                )
            try:
                response = await client.get(self.health_path, timeout=5.0)
                if response.status_code == 200:
                    logger.info("%s ready in %.1fs", server.label, time.monotonic() - started)
                    return
            except httpx.TransportError:
                pass
            now = time.monotonic()
            if now > deadline:
                raise LaunchFailed(
                    f"{self.name}'s server was not ready after {self.start_timeout_s:.0f}s"
                    f"{_cause(server)}; it printed last:\n{server.tail(5)}"
                )
            last = server.tail(1).splitlines()
            self.stage = f"waiting for {self.name} to load the model ({now - started:.0f}s)" + (
                f": {last[-1][-160:]}" if last else ""
            )
            await asyncio.sleep(0.5)

    async def unload(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
        if self._temp_dir is not None:
            self._temp_dir.cleanup()
            self._temp_dir = None

    _last_healthy: float = 0.0

    async def check_health(self) -> None:
        """EngineError when the server exited, or has not answered ``/health`` for :data:`HUNG_AFTER_S`."""
        server, client = self._require()
        code = server.returncode()
        if code is not None:
            raise EngineError(
                f"{self.name}'s server exited with code {code}{_cause(server)}; it printed last:\n{server.tail(5)}"
            )
        try:
            response = await client.get(self.health_path, timeout=10.0)
            if response.status_code == 200:
                self._last_healthy = time.monotonic()
                await self.refresh_stats()
                return
            problem = f"/health answered {response.status_code}"
        except httpx.HTTPError as exc:
            problem = f"/health did not answer ({type(exc).__name__})"
        silent = time.monotonic() - self._last_healthy
        if silent > HUNG_AFTER_S:
            raise EngineError(f"{self.name}'s server is hung: {problem}, healthy last {silent:.0f}s ago")
        logger.warning("%s: %s (healthy %.0fs ago)", server.label, problem, silent)

    async def refresh_stats(self) -> dict[str, float]:
        """Read the server's own counters (``/metrics``, Prometheus text) named in :attr:`metric_names`; kept for
        :meth:`stats`, refreshed at every health check. Never raises: counters are diagnostics."""
        if not self.metric_names or self._client is None:
            return {}
        try:
            response = await self._client.get("/metrics", timeout=5.0)
            found = (
                parse_metrics(response.text, set(self.metric_names.values()), self.averaged_metrics)
                if response.is_success
                else {}
            )
        except httpx.HTTPError:
            return dict(self._stats)
        stats = {ours: found[theirs] for ours, theirs in self.metric_names.items() if theirs in found}
        drafted = stats.get("spec_draft_tokens")
        if drafted:
            stats["spec_acceptance_rate"] = round(stats.get("spec_accepted_tokens", 0.0) / drafted, 4)
        self._stats = stats
        return dict(stats)

    def stats(self) -> dict[str, Any]:
        """The server's counters as of the last health check (running/waiting requests, tokens, speculative
        decoding's drafted and accepted tokens when it is on)."""
        return dict(self._stats)

    def _require(self) -> tuple[ServerProcess, httpx.AsyncClient]:
        if self._server is None or self._client is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._server, self._client

    # -- requests -------------------------------------------------------------------------------------------------
    def translate_request(self, request: dict[str, Any], kind: str) -> dict[str, Any]:
        """The body sent to the server for a platform request (OpenAI names plus our extensions). The servers
        read thinking switches only from ``chat_template_kwargs``: top-level ``enable_thinking`` and
        ``reasoning_effort`` are moved there (see :func:`server_template_kwargs`); a ``reasoning_effort`` the
        servers also know at the top level (low, medium, high) stays there as well. Image parts are given in
        OpenAI's form (:mod:`.vision`); their ``data:`` URIs pass through to the server, which runs the model's
        image processor."""
        body = dict(request)
        body["model"] = self.model_uid
        if kind == "chat":
            if isinstance(body.get("messages"), list):
                body["messages"] = openai_image_messages(body["messages"])  # the one image spelling servers read
            kwargs = server_template_kwargs(body)
            body.pop("enable_thinking", None)
            if body.get("reasoning_effort") not in _NATIVE_EFFORTS:
                body.pop("reasoning_effort", None)
            if kwargs:
                body["chat_template_kwargs"] = kwargs
        if "repeat_penalty" in body:
            body["repetition_penalty"] = body.pop("repeat_penalty")
        if self.family.stop_token_ids and "stop_token_ids" not in body:
            body["stop_token_ids"] = list(self.family.stop_token_ids)
        return body

    def _normalize(self, data: dict[str, Any]) -> dict[str, Any]:
        """Our field names on a response or chunk: the model uid, ``reasoning_content``."""
        data["model"] = self.model_uid
        for key in _VENDOR_NULLS:
            if key in data and data[key] is None:
                del data[key]
        for choice in data.get("choices") or ():
            for key in _VENDOR_NULLS:
                if key in choice and choice[key] is None:
                    del choice[key]
            part = choice.get("message") or choice.get("delta")
            if part and "reasoning" in part:
                reasoning = part.pop("reasoning")
                if reasoning is not None or "reasoning_content" not in part:
                    part["reasoning_content"] = reasoning
        return data

    def _check_tools(self, request: dict[str, Any]) -> None:
        """Tools with automatic choice need the server's tool parser, chosen at launch."""
        if request.get("tools") and request.get("tool_choice", "auto") == "auto" and not self.tool_parser():
            raise UnsupportedOption(
                f"model {self.model_uid!r} declares no tool-call format {self.name} can parse, so tool_choice "
                f"'auto' cannot work; relaunch with the tool_call_parser option, or force a call with tool_choice "
                f"'required' or a named function",
                param="tools",
            )

    def tool_parser(self) -> str | None:
        """The server's tool-call parser for this model (None: automatic tool choice is off)."""
        return None

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        _, client = self._require()
        try:
            response = await client.post(path, json=body)
        except httpx.TransportError as exc:
            raise ModelUnavailable(
                f"{self.name}'s server for {self.model_uid!r} is not answering: {type(exc).__name__}"
            ) from exc
        if response.status_code >= 400:
            raise error_from_server(self.name, response.status_code, response.content)
        data: dict[str, Any] = response.json()
        return self._normalize(data)

    def _open(self, path: str, body: dict[str, Any]) -> ChunkStream:
        self._require()
        stream = ChunkStream()
        relay = asyncio.create_task(self._relay(path, body, stream))
        # Cancelling the stream cancels the relay task, which closes the upstream response: the server aborts.
        stream.on_cancel(relay.cancel)
        return stream

    def _passable(self) -> Callable[[bytes], bytes | None]:
        """The byte-level check and rewrite of one streamed event (see the module docstring): the event's text as
        the platform's chunk, or None when it must be parsed and normalised (:meth:`_normalize`)."""
        model = b'"model":' + json.dumps(self.model_uid, ensure_ascii=False).encode()
        nulls = tuple((b',"' + key.encode() + b'":null', b'"' + key.encode() + b'"') for key in _VENDOR_NULLS)

        def passable(payload: bytes) -> bytes | None:
            if (
                model not in payload
                or b'"error"' in payload
                or b'"reasoning"' in payload
                or payload[:1] != b"{"
                or payload[-1:] != b"}"
            ):
                return None
            for null, key in nulls:
                if key in payload:
                    payload = payload.replace(null, b"")
                    if key in payload:
                        return None  # a value, or spelt otherwise: the parse decides
            return payload

        return passable

    async def _relay(self, path: str, body: dict[str, Any], stream: ChunkStream) -> None:
        """Read the server's SSE answer into ``stream``: each event passed on as its text when only bytes need to
        change (:meth:`_passable`), else parsed once and normalised; cancelling this task closes the connection,
        which makes the server abort the request."""
        normalize, push, passable = self._normalize, stream.push, self._passable()
        response: SSEResponse | None = None
        try:
            response = await open_sse(
                "127.0.0.1", self._port, path, {"Authorization": f"Bearer {self.api_key}"}, json.dumps(body).encode()
            )
            if response.status >= 400:
                stream.finish(error_from_server(self.name, response.status, await response.read_body()))
                return
            async for payload in response.events():
                if payload == b"[DONE]":
                    break
                text = passable(payload)
                if text is not None:
                    push(text)
                    continue
                chunk = json.loads(payload)
                if "error" in chunk and "choices" not in chunk:
                    error = chunk["error"] if isinstance(chunk["error"], dict) else chunk
                    stream.finish(error_from_server(self.name, int(error.get("code") or 500), json.dumps(error)))
                    return
                push(normalize(chunk))
        except asyncio.CancelledError:
            stream.finish()
            raise
        except (OSError, asyncio.IncompleteReadError) as exc:
            stream.finish(
                ModelUnavailable(f"{self.name}'s server for {self.model_uid!r} stopped answering: {type(exc).__name__}")
            )
            return
        except ValueError as exc:
            stream.finish(EngineError(f"{self.name} sent a malformed stream chunk: {exc}"))
            return
        finally:
            if response is not None:
                response.close()
        stream.finish()

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        forced = forced_tool_call(request)
        if forced is not None:
            return await self._forced_call(request, forced)
        self._check_tools(request)
        body = self.translate_request(request, "chat")
        body["stream"] = False
        body.pop("stream_options", None)
        return await self._post("/v1/chat/completions", body)

    async def chat_stream(self, request: dict[str, Any]) -> ChunkStream:
        forced = forced_tool_call(request)
        if forced is not None:
            reply = await self._forced_call(request, forced)
            stream = ChunkStream()
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            for chunk in forced.as_chunks(reply, include_usage):
                stream.push(chunk)
            stream.finish()
            return stream
        self._check_tools(request)
        body = self.translate_request(request, "chat")
        body["stream"] = True
        return self._open("/v1/chat/completions", body)

    async def completions(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self.translate_request(request, "completions")
        body["stream"] = False
        body.pop("stream_options", None)
        return await self._post("/v1/completions", body)

    async def completions_stream(self, request: dict[str, Any]) -> ChunkStream:
        body = self.translate_request(request, "completions")
        body["stream"] = True
        return self._open("/v1/completions", body)

    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        """An embedding model's vectors through the server's ``/v1/embeddings`` (see :mod:`.pooling`)."""
        if self.family.model_type != "embedding":
            raise self._unsupported("embed")
        data = await self._post("/v1/embeddings", embed_request(self.model_uid, request))
        return served_embeddings_answer(data, self.model_uid, request.get("encoding_format"))

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        """A reranker's scores through the server's ``/v1/rerank``, in the platform's rerank shape."""
        if self.family.model_type != "rerank":
            raise self._unsupported("rerank")
        data = await self._post("/v1/rerank", rerank_request(self.model_uid, request))
        documents = list(request["documents"])
        return rerank_answer(data, documents, request.get("top_n"), bool(request.get("return_documents")))

    async def _forced_call(self, request: dict[str, Any], forced: ForcedToolCall) -> dict[str, Any]:
        """``tool_choice`` required or named, built on the server's structured output (its own forced-tool path
        returned a JSON string instead of the arguments object): the model writes JSON under the tools' schema,
        which is validated and returned as a proper ``tool_calls`` entry."""
        body = self.translate_request(forced.request, "chat")
        body["stream"] = False
        body.pop("stream_options", None)
        reply = await self._post("/v1/chat/completions", body)
        return forced.to_reply(reply)
