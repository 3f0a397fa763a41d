"""Check vLLM and SGLang for real on a machine with an NVIDIA GPU, in one go, and print a table.

What it does, per engine (vLLM, then SGLang):

1. installs the engine's environment through the project's own command (``xinference engine install NAME
   --local``: ``vllm`` / ``sglang[all]`` into ``XINFERENCE_ENVS_DIR``), unless ``--skip-install``;
2. starts one ``xinference-local`` (a temporary ``XINFERENCE_HOME``) and launches a small model with the engine;
3. chats (greedy "capital of France" -> "Paris"), streams with usage, asks for ``json_schema`` output and
   validates it, forces a tool call (named and ``required``) and validates its arguments, lets the model call a tool
   on its own (``auto``, through the engine's parser chosen from the family's ``tool_call_format``), aborts a long
   stream by disconnecting and checks the engine's running-request count drops, terminates the model and checks
   its processes are gone and its GPU memory is given back.

Usage (from the repository root, with the project installed in the current Python)::

    python scripts/gpu_engines_check.py                       # qwen2.5-instruct 0.5B from Hugging Face
    python scripts/gpu_engines_check.py --model-path /models/Qwen2.5-0.5B-Instruct   # local weights, offline
    python scripts/gpu_engines_check.py --engines vLLM --skip-install

Exit code 0 when every check passed. Needs network access for the installs (or a wheel folder in
``PIP_FIND_LINKS``) and for the model unless ``--model-path`` is given. ``--allow-cpu`` runs it without a GPU
against vLLM's CPU build, to check the script itself: there a model whose family declares no tool-call format fails
the ``auto`` tool call with a 400 that says so, which is the expected answer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France? Answer in one sentence."},
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"capital": {"type": "string"}, "country": {"type": "string"}},
    "required": ["capital", "country"],
    "additionalProperties": False,
}
#: the engine's own running-request gauge on its ``/metrics`` (read from its loopback port)
RUNNING_METRIC = {"vLLM": "vllm:num_requests_running", "SGLang": "sglang:num_running_reqs"}
SERVER_MODULE = {"vLLM": "vllm.entrypoints.openai.api_server", "SGLang": "sglang.launch_server"}


class Check:
    """One row of the result table."""

    def __init__(self, engine: str, name: str) -> None:
        self.engine, self.name = engine, name
        self.ok: bool | None = None
        self.detail = ""
        self.seconds = 0.0


def run_check(results: list[Check], engine: str, name: str, body: Callable[[], str]) -> bool:
    check = Check(engine, name)
    started = time.monotonic()
    try:
        check.detail = body()
        check.ok = True
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row, the script goes on
        check.ok, check.detail = False, f"{type(exc).__name__}: {exc}"[:300]
    check.seconds = time.monotonic() - started
    results.append(check)
    mark = "ok  " if check.ok else "FAIL"
    print(f"[{mark}] {engine:7} {name:22} {check.seconds:7.1f}s  {check.detail}", flush=True)
    return bool(check.ok)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gpu_memory_used_mib() -> list[int]:
    if shutil.which("nvidia-smi") is None:  # --allow-cpu: nothing to measure
        return []
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [int(line) for line in out.split() if line.strip()]


def validate(value: Any, schema: dict[str, Any]) -> None:
    import jsonschema

    jsonschema.validate(value, schema)


def install(engine: str) -> str:
    command = [sys.executable, "-m", "xinference.cli", "engine", "install", engine, "--local"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"`xinference engine install {engine} --local` failed:\n{done.stdout[-800:]}{done.stderr[-800:]}"
        )
    return done.stdout.strip().splitlines()[-1][:200] if done.stdout.strip() else "installed"


class Platform:
    """One ``xinference-local`` in a temporary home."""

    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}/v1"
        self.log = (home / "server.out").open("wb")
        env = {**os.environ, "XINFERENCE_HOME": str(home), "XINFERENCE_MODEL_RESTARTS": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "xinference.deploy.local", "--port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api}/cluster/auth", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("xinference-local did not start")

    def engine_server(self, engine: str) -> Any:
        import psutil

        for proc in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if SERVER_MODULE[engine] in " ".join(proc.cmdline()):
                    return proc
            except psutil.Error:
                continue
        raise RuntimeError(f"no {engine} server process found")

    def stop(self) -> None:
        import psutil

        children = psutil.Process(self.process.pid).children(recursive=True)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        _, alive = psutil.wait_procs(children, timeout=30)
        for proc in alive:
            proc.kill()


def metric(server_proc: Any, name: str) -> float:
    cmdline = server_proc.cmdline()
    port = cmdline[cmdline.index("--port") + 1]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    values = [
        float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.MULTILINE)
    ]
    if not values:
        raise RuntimeError(f"{name} is not among the engine's metrics")
    return sum(values)


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST and return the JSON answer; a non-200 answer raises with the platform's error message."""
    reply = httpx.post(url, json=body, timeout=600)
    if reply.status_code != 200:
        raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:300]}")
    data: dict[str, Any] = reply.json()
    return data


def check_engine(engine: str, platform: Platform, launch: dict[str, Any], results: list[Check]) -> None:
    uid = f"check-{engine.lower()}"
    api = platform.api
    chat_url = f"{api}/chat/completions"
    before = gpu_memory_used_mib()

    def do_launch() -> str:
        post(f"{api}/models", {**launch, "model_engine": engine, "model_uid": uid})
        return f"GPU memory {sum(before)} -> {sum(gpu_memory_used_mib())} MiB"

    if not run_check(results, engine, "launch", do_launch):
        return

    def chat() -> str:
        reply = post(chat_url, {"model": uid, "messages": QUESTION, "temperature": 0, "max_tokens": 32})
        text = reply["choices"][0]["message"]["content"]
        if "Paris" not in text:
            raise AssertionError(f"no Paris in {text!r}")
        return f"{text[:60]!r} usage={reply['usage']['completion_tokens']}"

    def stream() -> str:
        body = {
            "model": uid,
            "messages": QUESTION,
            "temperature": 0,
            "max_tokens": 32,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        text, usage, first = "", None, None
        started = time.monotonic()
        with httpx.stream("POST", chat_url, json=body, timeout=300) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
            for line in response.iter_lines():
                if not line.startswith("data:") or line.endswith("[DONE]"):
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                    first = first or time.monotonic() - started
                    text += chunk["choices"][0]["delta"]["content"]
                usage = chunk.get("usage") or usage
        if "Paris" not in text or not usage:
            raise AssertionError(f"text {text!r}, usage {usage}")
        return f"TTFT {first * 1000:.0f} ms, {usage['completion_tokens']} tokens"

    def json_schema() -> str:
        reply = post(
            chat_url,
            {
                "model": uid,
                "messages": QUESTION,
                "temperature": 0,
                "max_tokens": 80,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
                },
            },
        )
        value = json.loads(reply["choices"][0]["message"]["content"])
        validate(value, ANSWER_SCHEMA)
        return json.dumps(value)[:80]

    def tool_call(choice: Any) -> Callable[[], str]:
        def run() -> str:
            body = {
                "model": uid,
                "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": [WEATHER],
                "temperature": 0,
                "max_tokens": 80,
            }
            if choice is not None:
                body["tool_choice"] = choice
            choice0 = post(chat_url, body)["choices"][0]
            calls = choice0["message"].get("tool_calls") or []
            if not calls:
                raise AssertionError(f"no tool call: {choice0['message'].get('content')!r}")
            arguments = json.loads(calls[0]["function"]["arguments"])
            validate(arguments, WEATHER["function"]["parameters"])
            return f"{calls[0]['function']['name']}({json.dumps(arguments)}) finish={choice0['finish_reason']}"

        return run

    def abort() -> str:
        server = platform.engine_server(engine)
        body = {"model": uid, "messages": QUESTION, "max_tokens": 1500, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", chat_url, json=body, timeout=300) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
            lines = (line for line in response.iter_lines() if line.startswith("data:"))
            for _ in range(10):
                next(lines)
            seen = time.monotonic() + 5
            while (running := metric(server, RUNNING_METRIC[engine])) < 1 and time.monotonic() < seen:
                time.sleep(0.1)  # the gauge follows the engine's steps a moment later
            if running < 1:
                raise AssertionError("the engine's running-request gauge never showed the request")
        closed = time.monotonic()
        while metric(server, RUNNING_METRIC[engine]) > 0:
            if time.monotonic() - closed > 15:
                raise AssertionError("the engine kept generating after the client left")
            time.sleep(0.1)
        return f"running {running:g} -> 0 in {time.monotonic() - closed:.2f}s"

    def terminate() -> str:
        import psutil

        server = platform.engine_server(engine)
        tree = [server, *server.children(recursive=True)]
        reply = httpx.delete(f"{api}/models/{uid}", timeout=300)
        if reply.status_code != 200:
            raise RuntimeError(reply.text[:300])
        _, alive = psutil.wait_procs(tree, timeout=60)
        if alive:
            raise AssertionError(f"still alive: {[p.pid for p in alive]}")
        time.sleep(2)
        after = gpu_memory_used_mib()
        if sum(after) > sum(before) + 1024:
            raise AssertionError(f"GPU memory not given back: {sum(before)} -> {sum(after)} MiB")
        return f"{len(tree)} processes gone; GPU memory {sum(after)} MiB (was {sum(before)} before launch)"

    for name, body in (
        ("chat", chat),
        ("stream", stream),
        ("json_schema", json_schema),
        ("tool call (named)", tool_call({"type": "function", "function": {"name": "get_weather"}})),
        ("tool call (required)", tool_call("required")),
        ("tool call (auto)", tool_call(None)),
        ("abort on disconnect", abort),
    ):
        run_check(results, engine, name, body)
    run_check(results, engine, "terminate", terminate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="vLLM,SGLang", help="comma-separated: vLLM,SGLang")
    parser.add_argument("--model-name", default="qwen2.5-instruct", help="a catalog model (downloaded)")
    parser.add_argument("--size", default="0_5", help="its size in billions (catalog spelling)")
    parser.add_argument("--model-path", default=None, help="local Hugging Face folder instead (offline)")
    parser.add_argument("--skip-install", action="store_true", help="use the engine envs as they are")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an engine launch option, e.g. max_model_len=4096 (repeatable)",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="run without a GPU (vLLM's CPU build): checks the script itself, not the GPU engines",
    )
    args = parser.parse_args()
    if shutil.which("nvidia-smi") is None and not args.allow_cpu:
        print("this check needs an NVIDIA GPU (nvidia-smi not found)")
        return 2
    launch: dict[str, Any] = {
        "model_name": args.model_name,
        "model_format": "pytorch",
        "model_size_in_billions": args.size,
        "quantization": "none",
    }
    if args.model_path:
        launch["model_path"] = args.model_path
    for option in args.option:
        key, _, raw = option.partition("=")
        try:
            launch[key] = json.loads(raw)
        except ValueError:
            launch[key] = raw
    results: list[Check] = []
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not args.skip_install:
        for engine in engines:
            run_check(results, engine, "install", lambda engine=engine: install(engine))  # type: ignore[misc]
    home = Path(tempfile.mkdtemp(prefix="xinference-gpu-check-"))
    platform = Platform(home)
    try:
        for engine in engines:
            if any(r.engine == engine and r.name == "install" and not r.ok for r in results):
                continue
            check_engine(engine, platform, launch, results)
    finally:
        platform.stop()
    print()
    print(f"{'engine':8} {'check':22} {'result':6} {'seconds':>8}  detail")
    for r in results:
        print(f"{r.engine:8} {r.name:22} {'ok' if r.ok else 'FAIL':6} {r.seconds:8.1f}  {r.detail[:90]}")
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed; server log: {home / 'server.out'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
