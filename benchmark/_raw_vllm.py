"""The raw vLLM baseline: vLLM's own OpenAI server, started with the very command line the platform used.

The platform runs vLLM as a managed server process (``python -m vllm.entrypoints.openai.api_server ...`` with the
engine env's Python). Rather than rebuilding that command from the launch options, and risking a setting that
differs, the benchmark reads it from the platform's running server process and starts a second copy with only
three things changed: its port, its served model name and no API key (the platform passes the key in
``VLLM_API_KEY``, which the copy does not get). The engine variables the platform set (``VLLM_CPU_KVCACHE_SPACE``,
``VLLM_USE_AOT_COMPILE``, ...) are copied from the process's environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psutil

__all__ = ["MODULE", "copied_env", "find_server", "raw_command"]

MODULE = "vllm.entrypoints.openai.api_server"
#: Variables of the platform's vLLM process that shape the engine and are copied to the raw one.
_COPIED_PREFIXES = ("VLLM_", "OMP_", "HF_", "TRANSFORMERS_", "DO_NOT_TRACK", "LD_PRELOAD")
_NOT_COPIED = frozenset({"VLLM_API_KEY"})


def find_server(processes: Sequence[psutil.Process]) -> psutil.Process:
    """The vLLM API server among ``processes`` (the platform's model process and its children)."""
    for proc in processes:
        try:
            if MODULE in proc.cmdline():
                return proc
        except psutil.Error:
            continue
    raise RuntimeError(f"no {MODULE} process under the platform's model")


def raw_command(platform_argv: Sequence[str], port: int, served_name: str) -> list[str]:
    """``platform_argv`` with ``--port`` and ``--served-model-name`` replaced (added when absent)."""
    replaced = {"--port": str(port), "--served-model-name": served_name}
    command: list[str] = []
    seen: set[str] = set()
    args = iter(platform_argv)
    for arg in args:
        flag, eq, _value = arg.partition("=")
        if flag in replaced:
            seen.add(flag)
            if not eq:
                next(args, None)  # the value is the next argument
            command += [flag, replaced[flag]]
        else:
            command.append(arg)
    for flag, value in replaced.items():
        if flag not in seen:
            command += [flag, value]
    return command


def copied_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The engine variables of the platform's vLLM process, without its API key."""
    return {key: value for key, value in environ.items() if key.startswith(_COPIED_PREFIXES) and key not in _NOT_COPIED}
