"""The MLX engine: fit, environment recipe, options, the rope fix and request translation (no mlx needed), then the
real thing on this Linux CPU: ``xinference-local`` starting the model process with the MLX env's Python.

The slow tests need the MLX env (``xinference engine install MLX``) in ``XINFERENCE_ENVS_DIR`` (default
``~/.cache/xinference/envs``, shared by CI runs); a machine without it installs it once (``ensure_engine_env``). The
in-process checks (stop strings, seeds, batching, cancel) live in ``test_mlx_engine.py``, which needs mlx-lm
importable: :func:`test_in_process_suite_in_the_env` runs it with the env's Python.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import ENGINE_ENVS_DIR, LocalServer, ensure_engine_env, start_local_server
from tests.machines import linux, mac
from xinference.engines.continuous.loop import held_back
from xinference.engines.mlx.config import MLXConfig
from xinference.engines.mlx.engine import MLXEngine
from xinference.engines.mlx.runtime import config_overrides, find_openblas
from xinference.engines.registry import ENGINE_ORDER, engine_order
from xinference.errors import ContextLengthExceeded, InvalidRequest, UnsupportedOption
from xinference.hardware import HardwareInfo
from xinference.model.registry import ModelRegistry

REGISTRY = ModelRegistry()
QWEN3 = REGISTRY.get("qwen3")
SMOLLM2 = REGISTRY.get("smollm2-instruct")
CPU = linux()
MAC = mac()
INTEL_MAC = mac(apple_silicon=False)
WINDOWS = HardwareInfo(os="windows", arch="x86_64", cpu_count=4, ram_total_bytes=1 << 34, ram_free_bytes=1 << 33)
ENVS_DIR = ENGINE_ENVS_DIR
ENV_PYTHON = ENVS_DIR / "mlx" / "bin" / "python"
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]


def _spec(fmt: str):  # type: ignore[no-untyped-def]
    return next(s for s in QWEN3.model_specs if s.model_format == fmt)


# -- fit and environment ---------------------------------------------------------------------------------------
def test_fit_on_apple_silicon_and_linux_cpus() -> None:
    for hardware in (MAC, CPU):
        assert MLXEngine.match(QWEN3, _spec("mlx"), hardware)
        assert MLXEngine.match(QWEN3, _spec("pytorch"), hardware)  # mlx-lm loads HF safetensors too
        rejected = MLXEngine.match(QWEN3, _spec("ggufv2"), hardware)
        assert not rejected and "not ggufv2" in rejected.reason
    for hardware, where in ((INTEL_MAC, "darwin x86_64"), (WINDOWS, "windows x86_64")):
        verdict = MLXEngine.match(QWEN3, _spec("mlx"), hardware)
        assert not verdict and verdict.reason.endswith(f"this worker is {where}")


def test_env_recipe_per_platform() -> None:
    on_mac, on_linux = MLXEngine.env_recipe(MAC), MLXEngine.env_recipe(CPU)
    assert on_mac is not None and on_linux is not None
    assert on_mac.packages[0] == "mlx" and on_linux.packages[0] == "mlx[cpu]"
    for recipe in (on_mac, on_linux):
        assert recipe.overlay and recipe.packages[1].startswith("mlx-lm>=")
        assert recipe.packages[2].startswith("llguidance")  # structured output, without torch
        assert recipe.packages[3] == "mlx-vlm==0.7.10"  # vision models, pinned
    assert MLXEngine.env_recipe(INTEL_MAC) is None and MLXEngine.env_recipe(WINDOWS) is None


def test_ranked_after_llama_cpp_and_before_transformers_only_on_apple_silicon() -> None:
    for order in (list(ENGINE_ORDER), list(engine_order(CPU))):
        assert order.index("llama.cpp") < order.index("Transformers") < order.index("MLX")
    on_mac = list(engine_order(MAC))
    assert on_mac.index("llama.cpp") < on_mac.index("MLX") < on_mac.index("Transformers")
    assert sorted(on_mac) == sorted(ENGINE_ORDER)


def test_missing_env_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("mlx_lm") is not None:
        pytest.skip("mlx-lm is importable in this interpreter (the env's Python)")
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))
    verdict = MLXEngine.check_lib()
    assert not verdict and "xinference engine install MLX" in verdict.reason


def test_openblas_is_preloaded_on_linux_when_installed() -> None:
    assert MLXEngine.process_env(MAC) == {}
    path = find_openblas()
    if path is None:
        assert MLXEngine.process_env(CPU) == {}
        pytest.skip("no system OpenBLAS here (apt-get install libopenblas0-pthread)")
    assert MLXEngine.process_env(CPU) == {"LD_PRELOAD": str(path)}
    assert path.name.startswith("libopenblas")


# -- the rope fix ----------------------------------------------------------------------------------------------
def _config(tmp_path: Path, config: dict) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_rope_theta_lifted_from_transformers5_configs(tmp_path: Path) -> None:
    nested = {"model_type": "llama", "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
    assert config_overrides(_config(tmp_path, nested)) == {"rope_theta": 100000.0}


def test_rope_scaling_lifted_with_it(tmp_path: Path) -> None:
    llama3 = {
        "rope_parameters": {
            "rope_theta": 500000,
            "rope_type": "llama3",
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
        }
    }
    assert config_overrides(_config(tmp_path, llama3)) == {
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    }
    wrapped = {"model_type": "gemma3", "text_config": {"rope_parameters": {"rope_theta": 1e6}}}
    assert config_overrides(_config(tmp_path, wrapped)) == {"rope_theta": 1e6}


def test_configs_mlx_lm_reads_already_are_left_alone(tmp_path: Path) -> None:
    assert config_overrides(_config(tmp_path, {"rope_theta": 10000.0, "rope_parameters": {"rope_theta": 1.0}})) == {}
    assert config_overrides(_config(tmp_path, {"rope_parameters": {"full_attention": {"rope_theta": 1e6}}})) == {}
    assert config_overrides(tmp_path / "missing") == {}


# -- options and request translation -----------------------------------------------------------------------------
def test_options_are_typed_and_sized_for_the_worker() -> None:
    with pytest.raises(InvalidRequest, match="does not take a launch option 'n_ctx'"):
        MLXEngine.parse_config({"n_ctx": 4096})
    with pytest.raises(InvalidRequest, match="'max_num_seqs'"):
        MLXEngine.parse_config({"max_num_seqs": 0})
    config = MLXEngine.parse_config({})
    assert isinstance(config, MLXConfig)
    cpu = config.resolve(cpu_count=2, metal=False, context_length=8192)
    assert (cpu.max_num_seqs, cpu.n_threads, cpu.max_model_len, cpu.prefill_step_size) == (4, 2, 8192, 512)
    assert (cpu.prompt_cache_size, cpu.prompt_cache_mib) == (10, 1024)  # mlx_lm.server keeps 10 too
    with pytest.raises(InvalidRequest, match="'prompt_cache_mib'"):
        MLXEngine.parse_config({"prompt_cache_mib": -1})
    assert config.resolve(cpu_count=10, metal=True, context_length=None).max_num_seqs == 16
    chosen = MLXConfig(max_num_seqs=1, max_model_len=512, n_threads=1).resolve(
        cpu_count=8, metal=True, context_length=8192
    )
    assert (chosen.max_num_seqs, chosen.max_model_len, chosen.n_threads) == (1, 512, 1)


def _engine() -> MLXEngine:
    spec = SMOLLM2.model_specs[0]
    engine = MLXEngine(
        model_uid="u",
        family=SMOLLM2,
        spec=spec,
        quantization=spec.quantizations[0],
        model_path="/m",
        config=MLXConfig(),
        hardware=CPU,
    )
    engine.resolved = MLXConfig(max_model_len=64).resolve(cpu_count=2, metal=False, context_length=None)
    engine._stop_token_ids = frozenset({2})
    engine._vocab_size = 49152
    return engine


def test_request_fields_become_sampling_params() -> None:
    engine = _engine()
    plan = engine._plan(
        "chat",
        {
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 40,
            "min_p": 0.05,
            "seed": 3,
            "repeat_penalty": 1.2,
            "presence_penalty": 0.5,
            "frequency_penalty": 0.25,
            "logit_bias": {"15": 100, "7": -3},
            "stop": ["END"],
            "max_tokens": 8,
            "logprobs": True,
            "top_logprobs": 2,
            "n": 2,
        },
        prompt_len=10,
    )
    params = plan.params
    assert (params.temperature, params.top_p, params.top_k, params.min_p, params.seed) == (0.7, 0.9, 40, 0.05, 3)
    assert (params.repetition_penalty, params.presence_penalty, params.frequency_penalty) == (1.2, 0.5, 0.25)
    assert params.logit_bias == ((15, 100.0), (7, -3.0))
    assert "END" in params.stop and "<|im_end|>" in params.stop and params.stop_token_ids == {2}
    assert params.max_tokens == 8 and (params.logprobs, params.top_logprobs) == (True, 2)
    assert plan.n == 2 and plan.constraint is None
    defaults = engine._plan("chat", {"temperature": 0, "top_k": -1, "ignore_eos": True}, prompt_len=10).params
    assert defaults.temperature == 0 and defaults.top_k == 0 and defaults.max_tokens == 54
    assert not defaults.stop_token_ids


def test_structured_output_and_forced_calls_become_a_grammar() -> None:
    pytest.importorskip("llguidance")
    engine = _engine()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    json_plan = engine._plan(
        "chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}}, 10
    )
    assert json_plan.constraint is not None and json_plan.constraint.kind == "json_schema"
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]
    forced = engine._plan("chat", {"tools": tools, "tool_choice": "required"}, 10)
    assert forced.constraint is not None and forced.constraint.kind == "tool_call"
    assert engine._plan("chat", {"tools": tools, "tool_choice": "auto"}, 10).constraint is None


def test_request_errors_are_400s_naming_the_field() -> None:
    engine = _engine()
    for body, field in (
        ({"n": 9}, "n"),
        ({"logit_bias": {"hello": 1}}, "logit_bias"),
        ({"logit_bias": {"1": 500}}, "logit_bias"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"tool_choice": "required"}, "tool_choice"),
    ):
        with pytest.raises(InvalidRequest) as caught:
            engine._plan("chat", body, prompt_len=4)
        assert caught.value.param == field, body
    with pytest.raises(UnsupportedOption, match="MLX"):
        engine._plan("chat", {"n": 9}, prompt_len=4)
    with pytest.raises(InvalidRequest) as refused:
        engine._plan("completions", {"response_format": {"type": "json_object"}}, prompt_len=4)
    assert refused.value.param == "response_format"
    with pytest.raises(ContextLengthExceeded, match="64 tokens"):
        engine._plan("chat", {}, prompt_len=64)


def test_stop_string_prefixes_are_held_back() -> None:
    assert held_back("The capital is Pa", ("Paris",)) == 2
    assert held_back("Hello <|im", ("<|im_end|>", "STOP")) == 4
    assert held_back("nothing here", ("Paris",)) == 0


# -- the real engine, from its env ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlx_env() -> Path:
    """The MLX env, installed once under ENGINE_ENVS_DIR when missing (a failed install fails the tests)."""
    return ensure_engine_env("MLX")


@pytest.mark.slow
@pytest.mark.timeout(900)  # a whole suite: ~2.5 min on 2 busy cores
def test_in_process_suite_in_the_env(mlx_env: Path) -> None:
    """``test_mlx_engine.py`` with the env's Python (mlx-lm is not importable from the main environment)."""
    suite = Path(__file__).with_name("test_mlx_engine.py")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [str(ENV_PYTHON), "-m", "pytest", str(suite), "-q", "-x", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " skipped" not in result.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_vision_suite_in_the_env(mlx_env: Path) -> None:
    """``test_mlx_vision.py`` (a tiny LLaVA through mlx-vlm) with the env's Python, where mlx-vlm is installed."""
    suite = Path(__file__).with_name("test_mlx_vision.py")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [str(ENV_PYTHON), "-m", "pytest", str(suite), "-q", "-x", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " skipped" not in result.stdout


@pytest.fixture(scope="module")
def mlx_server(tmp_path_factory: pytest.TempPathFactory, mlx_env: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from benchmark._weights import converted_smollm2

    weights = converted_smollm2()
    server = start_local_server(tmp_path_factory.mktemp("xinference-home"), env={"XINFERENCE_ENVS_DIR": str(ENVS_DIR)})
    name = "smollm2-135m-mlx-test"
    family = {
        "model_name": name,
        "model_ability": ["chat", "generate"],
        "context_length": 2048,
        "stop_token_ids": [2],
        "stop": ["<|im_end|>"],
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_135",
                "quantizations": ["none"],
                "model_uri": f"file://{weights}",
            }
        ],
    }
    try:
        registered = httpx.post(f"{server.api}/model_registrations/LLM", json={"model": family}, timeout=30)
        assert registered.status_code == 200, registered.text
        launched = httpx.post(
            f"{server.api}/models", timeout=300, json={"model_name": name, "model_engine": "MLX", "max_num_seqs": 2}
        )
        assert launched.status_code == 200, launched.text + server.log()[-3000:]
        yield server, name
    finally:
        server.stop_and_reap()


def _replica(server: LocalServer, name: str) -> dict:
    described = httpx.get(f"{server.api}/models/{name}", timeout=30)
    assert described.status_code == 200, described.text
    replicas = described.json()["replicas"]
    assert len(replicas) == 1, replicas
    return dict(replicas[0])


def _engine_stats(address: str) -> dict:
    """The replica's engine counters, asked of its model actor over xoscar."""
    import xoscar as xo

    from xinference.core.model_actor import ModelActor

    async def ask() -> dict:
        ref = await xo.actor_ref(address, ModelActor.default_uid())
        return dict(await ref.engine_stats())

    return asyncio.run(ask())


@pytest.mark.slow
def test_chat_stream_and_usage_through_the_server(mlx_server) -> None:  # type: ignore[no-untyped-def]
    from openai import OpenAI

    server, name = mlx_server
    process = psutil.Process(_replica(server, name)["pid"])
    assert process.cmdline()[0] == str(ENV_PYTHON)  # the model process runs the env's Python
    openblas = find_openblas()
    if openblas is not None:
        assert process.environ().get("LD_PRELOAD") == str(openblas)
    client = OpenAI(base_url=server.api, api_key="x")
    reply = client.chat.completions.create(model=name, messages=QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in (reply.choices[0].message.content or "")
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    stream = client.chat.completions.create(
        model=name, messages=QUESTION, temperature=0, max_tokens=16, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert "Paris" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.slow
def test_the_engine_table_lists_mlx_once_installed(mlx_server) -> None:  # type: ignore[no-untyped-def]
    """The matcher on this Linux CPU with MLX's env installed: MLX takes the pytorch model, SGLang says why not."""
    server, name = mlx_server
    response = httpx.get(f"{server.api}/engines/LLM/{name}", timeout=30)
    assert response.status_code == 200, response.text
    table = response.json()
    assert isinstance(table["MLX"], list), table["MLX"]
    assert [(p["model_format"], p["quantizations"]) for p in table["MLX"]] == [("pytorch", ["none"])]
    assert table["SGLang"] == "SGLang has no CPU build; it needs an NVIDIA GPU"


def _cli(server: LocalServer, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``xinference ARGS`` as a user runs it, against ``server`` (``XINFERENCE_ENDPOINT``)."""
    env = {**os.environ, "XINFERENCE_ENDPOINT": server.endpoint}
    return subprocess.run(
        [sys.executable, "-m", "xinference.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=300,
    )


@pytest.mark.slow
def test_install_then_launch_from_the_command_line(mlx_server) -> None:  # type: ignore[no-untyped-def]
    """The issue's "done when" as typed: ``xinference engine install MLX`` (installed already: it says so and
    changes nothing), then ``xinference launch -n <a pytorch model> -en MLX`` (the catalog's SmolLM2 with local
    weights, since this machine is offline), then a chat on the command line and a greedy one over the API."""
    from openai import OpenAI

    from benchmark._weights import converted_smollm2

    server, _ = mlx_server
    installed = _cli(server, "engine", "install", "MLX")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "MLX is already installed" in installed.stdout and "MLX installed (" in installed.stdout
    launched = _cli(
        server,
        "launch",
        "-n",
        "smollm2-instruct",
        "-en",
        "MLX",
        "-f",
        "pytorch",
        "-s",
        "0_135",
        "-u",
        "mlx-cli",
        "--model-path",
        str(converted_smollm2()),
        "--max_num_seqs",
        "1",
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "Model uid: mlx-cli" in launched.stdout and "Engine: MLX" in launched.stdout
    try:
        chat = _cli(server, "chat", "-u", "mlx-cli", "--max-tokens", "12", stdin="What is the capital of France?\n")
        assert chat.returncode == 0, chat.stdout + chat.stderr
        assert chat.stdout.replace(">>>", "").strip(), chat.stdout  # a streamed reply was printed
        reply = OpenAI(base_url=server.api, api_key="x").chat.completions.create(
            model="mlx-cli", messages=QUESTION, temperature=0, max_tokens=16
        )
        assert "Paris" in (reply.choices[0].message.content or "")
    finally:
        terminated = _cli(server, "terminate", "-u", "mlx-cli")
    assert terminated.returncode == 0, terminated.stdout + terminated.stderr


@pytest.mark.slow
def test_json_schema_and_forced_tool_call_through_the_server(mlx_server) -> None:  # type: ignore[no-untyped-def]
    from openai import OpenAI

    jsonschema = pytest.importorskip("jsonschema")
    server, name = mlx_server
    client = OpenAI(base_url=server.api, api_key="x")
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "country": {"type": "string", "maxLength": 30}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    reply = client.chat.completions.create(
        model=name,
        messages=QUESTION,
        temperature=0,
        max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Current weather of a city", "parameters": schema},
        }
    ]
    forced = client.chat.completions.create(
        model=name,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        temperature=0,
        max_tokens=60,
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = forced.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), schema)
    bad = httpx.post(
        f"{server.api}/chat/completions",
        timeout=60,
        json={
            "model": name,
            "messages": QUESTION,
            "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}},
        },
    )
    assert bad.status_code == 400 and "response_format" in bad.text


@pytest.mark.slow
def test_client_disconnect_frees_the_request(mlx_server) -> None:  # type: ignore[no-untyped-def]
    server, name = mlx_server
    address = _replica(server, name)["address"]
    before = _engine_stats(address)
    assert before["mode"] == "batch" and before["blas"] != "mlx"  # batching, with OpenBLAS
    body = {
        "model": name,
        "messages": [{"role": "user", "content": "Tell me a very long story."}],
        "max_tokens": 2000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", f"{server.api}/chat/completions", json=body, timeout=120) as response:
        seen = 0
        for line in response.iter_lines():
            seen += line.startswith("data: ")
            if seen >= 3:
                break
    deadline = time.monotonic() + 20
    stats = _engine_stats(address)
    while time.monotonic() < deadline and (stats["running"] or stats["aborted"] == before["aborted"]):
        time.sleep(0.2)
        stats = _engine_stats(address)
    assert stats["running"] == 0 and stats["aborted"] == before["aborted"] + 1
    assert stats["generated_tokens"] - before["generated_tokens"] < 1000  # it stopped long before 2000 tokens


@pytest.mark.slow
def test_kill_9_then_terminate_leaves_nothing(mlx_server) -> None:  # type: ignore[no-untyped-def]
    server, name = mlx_server
    first = psutil.Process(_replica(server, name)["pid"])
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    deadline, replica = time.monotonic() + 180, None
    while time.monotonic() < deadline:  # the worker notices the dead process and restarts the replica
        described = httpx.get(f"{server.api}/models/{name}", timeout=30).json()
        replicas = described.get("replicas") or []
        if replicas and replicas[0].get("pid") not in (None, first.pid) and described.get("status") == "ready":
            replica = replicas[0]
            break
        time.sleep(1)
    assert replica is not None, server.log()[-3000:]
    assert not any(p.pid == first.pid for p in server.descendants())
    second = psutil.Process(replica["pid"])
    rss = second.memory_info().rss
    assert rss > 100 << 20  # the weights are loaded in it
    terminated = httpx.delete(f"{server.api}/models/{name}", timeout=60)
    assert terminated.status_code == 200, terminated.text
    second.wait(timeout=30)
    assert not any(str(ENVS_DIR / "mlx") in " ".join(p.cmdline()) for p in server.descendants() if p.is_running())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_vision_chat_through_the_platform(tmp_path_factory: pytest.TempPathFactory, mlx_env: Path) -> None:
    """A tiny LLaVA registered with the vision ability and launched on MLX by ``xinference-local``: the model
    process (the env's Python) loads it with mlx-vlm, an image sent as a ``data:`` URI through the openai SDK is
    counted in the prompt's tokens, and a text request on the same model works."""
    pytest.importorskip("transformers")
    from openai import OpenAI

    from tests.engines.vision_weights import hub_layout
    from tests.vision_models import IMAGE_TOKENS, build_tiny_llava, image_data_uri, launched_vision_model

    folder = hub_layout(build_tiny_llava(tmp_path_factory.mktemp("tiny-llava-mlx-server")))
    server = start_local_server(tmp_path_factory.mktemp("mlx-vision-home"), env={"XINFERENCE_ENVS_DIR": str(ENVS_DIR)})
    try:
        with launched_vision_model(server, "tiny-llava-mlx", folder, timeout=600, model_engine="MLX") as launched:
            assert launched["model_engine"] == "MLX"
            client = OpenAI(base_url=server.api, api_key="x", max_retries=0)
            image = {"type": "image_url", "image_url": {"url": image_data_uri()}}
            question = {"type": "text", "text": "What is in this image?"}
            seen = client.chat.completions.create(
                model="tiny-llava-mlx",
                messages=[{"role": "user", "content": [image, question]}],  # type: ignore[list-item]
                temperature=0,
                max_tokens=4,
            )
            text = client.chat.completions.create(
                model="tiny-llava-mlx",
                messages=[{"role": "user", "content": [question]}],  # type: ignore[list-item]
                temperature=0,
                max_tokens=4,
            )
            assert seen.usage is not None and text.usage is not None
            # the template writes "<image>\n": the image's tokens and one for the newline
            assert seen.usage.prompt_tokens == text.usage.prompt_tokens + IMAGE_TOKENS + 1
            assert seen.usage.completion_tokens == 4
    finally:
        server.stop_and_reap(grace=30)
