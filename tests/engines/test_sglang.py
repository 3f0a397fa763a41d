"""SGLang's adapter against the managed-server runner's contract, with vLLM's CPU server standing in for SGLang's.

SGLang has no CPU build, so its server cannot run here; vLLM's OpenAI server speaks the same protocol where it
matters (``/health``, ``/v1/chat/completions`` streamed and not, OpenAI error bodies, abort when the client
closes the connection). The stand-in class keeps every part of SGLang's adapter except the command line and its
environment; each test name says "vllm_standing_in". SGLang's own command line is checked in
``test_sglang_config.py``, and for real by ``scripts/gpu_engines_check.py`` on a GPU machine.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from benchmark._weights import converted_smollm2  # noqa: E402
from tests.conftest import ENGINE_ENVS_DIR, ensure_engine_env  # noqa: E402
from xinference.engines import envs  # noqa: E402
from xinference.engines.base import Engine, Verdict  # noqa: E402
from xinference.engines.managed import engine as managed  # noqa: E402
from xinference.engines.sglang.engine import SGLangEngine  # noqa: E402
from xinference.engines.vllm.engine import VLLMEngine  # noqa: E402
from xinference.errors import ContextLengthExceeded, EngineError, InvalidRequest  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

pytestmark = pytest.mark.slow

ENVS_DIR = str(ENGINE_ENVS_DIR)
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture(scope="module", autouse=True)
def _vllm_env() -> None:
    """vLLM's env (the stand-in's), installed once when missing; a failed install fails the tests."""
    ensure_engine_env("vLLM")


class SGLangWithVLLMStandingIn(SGLangEngine):
    """SGLang's adapter, but the server it starts is vLLM's CPU build (test double for the GPU-only SGLang); its
    counters therefore have vLLM's names."""

    metric_names = VLLMEngine.metric_names

    @classmethod
    def check_lib(cls) -> Verdict:
        return Verdict.ok()

    @classmethod
    def match(cls, family, spec, hardware):  # type: ignore[no-untyped-def]
        return Engine.match.__func__(cls, family, spec, hardware)  # type: ignore[attr-defined]

    @classmethod
    def server_python(cls) -> str:
        python = envs.env_python("vLLM")
        assert python is not None
        return str(python)

    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        return [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model_path,
            "--served-model-name",
            self.model_uid,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "bfloat16",
            "--enforce-eager",
            "--max-model-len",
            "2048",
            "--api-key",
            api_key,
        ]

    def server_env(self) -> dict[str, str]:
        return {**super().server_env(), "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1"}


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(loop: asyncio.AbstractEventLoop, monkeypatch_module: Any) -> Iterator[SGLangWithVLLMStandingIn]:
    monkeypatch_module.setenv("XINFERENCE_ENVS_DIR", ENVS_DIR)
    family = ModelRegistry().get("smollm2-instruct")
    spec = next(s for s in family.model_specs if s.model_format == "pytorch")
    engine = SGLangWithVLLMStandingIn(
        model_uid="sglang-standin",
        family=family,
        spec=spec,
        quantization="none",
        model_path=str(converted_smollm2()),
        config=SGLangEngine.parse_config({}),
        hardware=detect_hardware(),
    )
    stages: list[str] = []

    async def load() -> None:
        task = asyncio.ensure_future(engine.load())
        while not task.done():
            stages.append(engine.stage)
            await asyncio.sleep(1)
        await task

    loop.run_until_complete(load())
    assert engine.stage == "ready" and any("waiting for SGLang to load the model" in s for s in stages)
    yield engine
    loop.run_until_complete(engine.unload())


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def _running(engine: SGLangWithVLLMStandingIn) -> float:
    port = str(engine._client.base_url).rsplit(":", 1)[1].rstrip("/")  # type: ignore[union-attr]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    match = re.search(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.]+)$", text, re.MULTILINE)
    assert match is not None
    return float(match.group(1))


def test_chat_with_vllm_standing_in(loop, engine) -> None:  # type: ignore[no-untyped-def]
    reply = loop.run_until_complete(
        engine.chat({"messages": QUESTION, "temperature": 0, "max_tokens": 16, "repeat_penalty": 1.0})
    )
    assert "Paris" in reply["choices"][0]["message"]["content"] and reply["model"] == "sglang-standin"
    assert reply["usage"]["completion_tokens"] > 0


def test_count_tokens_with_vllm_standing_in(loop, engine) -> None:  # type: ignore[no-untyped-def]
    """SGLang's count (the prompt rendered by the adapter, counted by the server's ``/tokenize``) equals the
    ``prompt_tokens`` the server reports for the same chat, with tools, an earlier call and its result."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    history = [
        *QUESTION,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny."},
    ]
    for request in (
        {"messages": QUESTION},
        {"messages": history, "tools": tools, "tool_choice": "none"},
        {"messages": QUESTION, "tools": tools, "tool_choice": "required"},
    ):
        counted = loop.run_until_complete(engine.count_tokens(request))
        reply = loop.run_until_complete(engine.chat({**request, "max_tokens": 48, "temperature": 0}))
        assert counted == reply["usage"]["prompt_tokens"] > 10, request


def test_stream_and_abort_with_vllm_standing_in(loop, engine) -> None:  # type: ignore[no-untyped-def]
    async def run() -> tuple[int, float]:
        stream = await engine.chat_stream({"messages": QUESTION, "max_tokens": 1500, "ignore_eos": True})
        received = 0
        while received < 5:
            batch, done = await stream.next_batch()
            assert not done
            received += len(batch)
        seen = time.monotonic() + 5
        while _running(engine) < 1:  # the gauge follows the engine's steps
            assert time.monotonic() < seen, "the server's gauge never showed the request"
            await asyncio.sleep(0.1)
        stream.cancel()  # what the model actor does when the client goes away
        cancelled = time.monotonic()
        while _running(engine) > 0:
            assert time.monotonic() - cancelled < 10, "the server kept generating after the abort"
            await asyncio.sleep(0.2)
        return received, time.monotonic() - cancelled

    received, freed = loop.run_until_complete(run())
    print(f"aborted after {received} chunks; the server freed the request in {freed:.2f}s")
    loop.run_until_complete(engine.check_health())  # refreshes the counters
    stats = engine.stats()
    assert stats["requests_running"] == 0 and stats["generation_tokens"] >= received


def test_errors_with_vllm_standing_in(loop, engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ContextLengthExceeded, match="2048"):
        loop.run_until_complete(engine.chat({"messages": [{"role": "user", "content": "word " * 3000}]}))
    with pytest.raises(InvalidRequest):
        loop.run_until_complete(engine.chat({"messages": QUESTION, "logprobs": True, "top_logprobs": 1000}))

    async def overflow_streamed() -> None:
        stream = await engine.chat_stream({"messages": [{"role": "user", "content": "word " * 3000}]})
        await stream.next_batch()

    with pytest.raises(ContextLengthExceeded):
        loop.run_until_complete(overflow_streamed())


def test_health_notices_hung_then_dead_server_with_vllm_standing_in(loop, engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    loop.run_until_complete(engine.check_health())  # healthy
    pid = engine._server.pid
    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    monkeypatch.setattr(managed, "HUNG_AFTER_S", 1.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)
        with pytest.raises(EngineError, match="hung"):
            loop.run_until_complete(engine.check_health())
    finally:
        os.kill(pid, signal.SIGCONT)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    with pytest.raises(EngineError, match="exited with code -9"):
        loop.run_until_complete(engine.check_health())
    loop.run_until_complete(engine.unload())  # the orphaned engine core and worker go with the group
    _, alive = psutil.wait_procs(tree, timeout=20)
    assert not alive
