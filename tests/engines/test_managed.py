"""The managed-server runner's process guarantees, error mapping and forced tool calls, without an engine.

The process tests use a tiny Python process tree as the "server" (a stand-in for vLLM's API server and its
spawned children, which ``test_vllm.py`` checks for real): what matters here is the process group, the watchdog and
the stop sequence, which behave the same whatever the server runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from xinference.engines.managed.engine import error_from_server, parse_metrics
from xinference.engines.managed.process import ServerProcess
from xinference.engines.managed.tools import forced_tool_call
from xinference.errors import ContextLengthExceeded, EngineError, InvalidRequest, ModelUnavailable

# A stand-in server: writes its pid, starts a child in its group and a grandchild that leaves the group (setsid),
# then sleeps; with IGNORE_TERM it ignores SIGTERM.
_TREE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    out = sys.argv[1]
    if os.environ.get("IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    with open(out, "w") as f:
        f.write(f"{os.getpid()} {child.pid} {escaped.pid}")
    print("stand-in server up", flush=True)
    time.sleep(600)
""")


def _wait_for_pids(path: Path, timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the stand-in server did not start")


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pids):
        time.sleep(0.1)
    return _alive(pids)


def test_kill_9_of_the_model_process_leaves_no_server_process(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    # The "model process": starts the server through the runner, then waits to be killed.
    model_code = textwrap.dedent(f"""
        import sys, time
        from xinference.engines.managed.process import ServerProcess
        server = ServerProcess("stand-in", [sys.executable, "-c", {_TREE!r}, {str(pids_file)!r}], {{}},
                               log_path=__import__("pathlib").Path({str(tmp_path / "server.log")!r}))
        server.start()
        print(server.watchdog.pid, flush=True)
        time.sleep(600)
    """)
    model = subprocess.Popen(
        [sys.executable, "-c", model_code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        assert model.stdout is not None
        watchdog = int(model.stdout.readline())
        server_pids = _wait_for_pids(pids_file)
        time.sleep(1.5)  # the watchdog has seen the escaped grandchild
        assert len(_alive(server_pids)) == 3
        model.kill()  # kill -9: no cleanup code of the model process runs
        model.wait(10)
        assert _wait_gone(server_pids, 15) == [], "an engine process outlived its model process"
        assert _wait_gone([watchdog], 10) == []
    finally:
        model.kill()
        for pid in _alive(_wait_for_pids(pids_file, 1) if pids_file.exists() else []):
            os.kill(pid, signal.SIGKILL)
    assert "stand-in server up" in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize("ignore_term", [False, True])
def test_stop_ends_the_whole_tree(tmp_path: Path, ignore_term: bool) -> None:
    pids_file = tmp_path / "pids"
    env = {**os.environ, **({"IGNORE_TERM": "1"} if ignore_term else {})}
    server = ServerProcess(
        "stand-in",
        [sys.executable, "-c", _TREE, str(pids_file)],
        env,
        log_path=tmp_path / "server.log",
        stop_grace_s=1.0,
    )
    server.start()
    pids = _wait_for_pids(pids_file)
    time.sleep(1.5)
    started = time.monotonic()
    asyncio.run(server.stop())
    took = time.monotonic() - started
    assert _wait_gone(pids, 5) == []
    assert server.returncode() is not None
    assert server.watchdog is not None and server.watchdog.poll() is not None
    assert took < (3.0 if ignore_term else 1.0) + 2.0
    assert "stand-in server up" in server.tail(3)


def test_a_temporary_log_is_removed_on_stop(tmp_path: Path) -> None:
    code = "print('hello from the server'); import sys; sys.exit(3)"
    server = ServerProcess("stand-in", [sys.executable, "-c", code], dict(os.environ))
    server.start()
    deadline = time.monotonic() + 20
    while server.returncode() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.returncode() == 3
    assert server.tail(1) == "hello from the server"
    log = server.log_path
    asyncio.run(server.stop())
    assert not log.exists()


def test_server_errors_map_to_platform_errors() -> None:
    vllm_body = json.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 2048 tokens. However, your "
                "prompt contains 3000 input tokens.",
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        }
    )
    assert isinstance(error_from_server("vLLM", 400, vllm_body), ContextLengthExceeded)
    sglang_body = json.dumps(
        {
            "object": "error",
            "message": "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
            "code": 400,
        }
    )
    assert isinstance(error_from_server("SGLang", 400, sglang_body), ContextLengthExceeded)
    bad = error_from_server(
        "vLLM", 400, json.dumps({"error": {"message": "temperature must be >= 0", "param": "temperature", "code": 400}})
    )
    assert type(bad) is InvalidRequest and bad.message == "temperature must be >= 0" and bad.param == "temperature"
    assert isinstance(error_from_server("vLLM", 422, b"not json"), InvalidRequest)
    busy = error_from_server("vLLM", 503, b'{"error": {"message": "overloaded"}}')
    assert isinstance(busy, ModelUnavailable) and "overloaded" in busy.message
    crash = error_from_server("vLLM", 500, b'{"error": {"message": "boom in /opt/venv/lib/x.py"}}')
    assert isinstance(crash, EngineError) and "/opt/venv" not in crash.message and "x.py" in crash.message


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
        },
    },
]


def _reply(content: str, finish: str = "stop") -> dict:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
    }


def test_forced_named_call_becomes_a_structured_request_and_a_tool_call() -> None:
    request = {
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    forced = forced_tool_call(request)
    assert forced is not None
    sent = forced.request
    assert sent["tool_choice"] == "none" and sent["tools"] == TOOLS
    assert sent["response_format"]["json_schema"]["schema"] == TOOLS[0]["function"]["parameters"]
    assert sent["messages"][0]["role"] == "system" and "get_weather" in sent["messages"][0]["content"]
    assert request["tool_choice"]["function"]["name"] == "get_weather"  # the caller's dict is untouched
    reply = forced.to_reply(_reply('{"city": "Paris"}'))
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert call["id"].startswith("call_") and reply["usage"]["total_tokens"] == 9
    chunks = forced.as_chunks(reply, include_usage=True)
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["usage"]["completion_tokens"] == 4


def test_forced_required_call_chooses_among_tools_and_validates() -> None:
    forced = forced_tool_call(
        {"messages": [{"role": "system", "content": "Be brief."}], "tools": TOOLS, "tool_choice": "required"}
    )
    assert forced is not None
    assert len(forced.schema()["anyOf"]) == 2
    assert forced.request["messages"][0]["content"].startswith("Be brief.")
    reply = forced.to_reply(_reply('{"name": "get_time", "arguments": {"zone": "CET"}}'))
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time"
    with pytest.raises(EngineError, match="does not match its parameters"):
        forced.to_reply(_reply('{"name": "get_time", "arguments": {"city": "Paris"}}'))
    with pytest.raises(EngineError, match="names no known function"):
        forced.to_reply(_reply('{"name": "other", "arguments": {}}'))
    with pytest.raises(InvalidRequest, match="raise max_tokens"):
        forced.to_reply(_reply('{"name": "get_t', finish="length"))


def test_tool_choice_errors_are_400() -> None:
    assert forced_tool_call({"messages": [], "tools": TOOLS, "tool_choice": "auto"}) is None
    assert forced_tool_call({"messages": []}) is None
    with pytest.raises(InvalidRequest, match="not among the tools"):
        forced_tool_call({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    with pytest.raises(InvalidRequest, match="needs tools"):
        forced_tool_call({"tool_choice": "required"})
    with pytest.raises(InvalidRequest, match="tool_choice must be"):
        forced_tool_call({"tools": TOOLS, "tool_choice": "always"})


def test_parse_metrics_sums_label_sets() -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests running.",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0',
            'vllm:num_requests_running{engine="1",model_name="m"} 1.0',
            'vllm:generation_tokens_total{engine="0"} 1.5e+03',
            "sglang:num_queue_reqs 4",
            "broken_line{ nan-value",
        ]
    )
    assert parse_metrics(
        text, {"vllm:num_requests_running", "vllm:generation_tokens_total", "sglang:num_queue_reqs", "absent"}
    ) == {"vllm:num_requests_running": 3.0, "vllm:generation_tokens_total": 1500.0, "sglang:num_queue_reqs": 4.0}
