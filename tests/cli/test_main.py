"""Tests for the ``xinference`` CLI (xinference.cli.main and the command modules beside it).

Option parsing is unit-tested without a server; the commands run through click's CliRunner against the
session's real ``xinference-local`` (``-e endpoint``), launching and terminating a second llama.cpp instance.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from tests.conftest import DEFAULT_MODEL, free_port
from xinference.cli.launch import rate_text
from xinference.cli.main import main
from xinference.cli.options import convert_option_value, parse_engine_options
from xinference.cli.output import format_table

SECOND_UID = "cli-second"


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env=env, catch_exceptions=False)


# -- without a server ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "exported"),
    [
        ("main", {"main"}),
        ("options", {"client_session", "connection_options", "convert_option_value", "parse_engine_options"}),
        ("output", {"ProgressBar", "format_table", "human_size"}),
        ("launch", {"launch", "rate_text"}),
        ("chat", {"chat"}),
        ("models", {"COMMANDS"}),
        ("cache", {"COMMANDS"}),
        ("engines", {"engine"}),
        ("ops", {"COMMANDS", "FOLLOW_INTERVAL_S", "follow_log"}),
        ("mcp", {"COMMANDS", "ClientPlatform", "mcp"}),
    ],
)
def test_exports(module: str, exported: set[str]) -> None:
    loaded = importlib.import_module(f"xinference.cli.{module}")
    assert set(loaded.__all__) == exported
    assert all(hasattr(loaded, name) for name in exported)


def test_every_command_is_on_the_group() -> None:
    assert set(main.commands) == {
        "launch",
        "cached",
        "remove-cache",
        "list",
        "terminate",
        "register",
        "unregister",
        "registrations",
        "engine",
        "logs",
        "unload",
        "load",
        "devices",
        "launch-history",
        "chat",
        "transcribe",
        "speak",
        "mcp",
    }


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xinference.cli", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "launch" in done.stdout and "registrations" in done.stdout


def test_deploy_keeps_only_process_bootstrapping() -> None:
    import xinference.deploy

    deploy_dir = Path(xinference.deploy.__file__).parent
    assert sorted(p.name for p in deploy_dir.glob("*.py")) == [
        "__init__.py",
        "bootstrap.py",
        "cluster.py",
        "event_loop.py",
        "local.py",
        "logs.py",
    ]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("xinference.deploy.cli")


def test_console_script_points_at_cli_main() -> None:
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts["xinference"] == "xinference.cli.main:main"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("-1", -1),
        ("+3", 3),
        ("0.5", 0.5),
        (".5", 0.5),
        ("1e-3", 0.001),
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("none", None),
        ("None", None),
        ("null", None),
        ("auto", "auto"),
        ("q8_0", "q8_0"),
        ("1_000", "1_000"),
        ("nan", "nan"),
        ("inf", "inf"),
        ("", ""),
        ("0x10", "0x10"),
    ],
)
def test_convert_option_value(text: str, expected: Any) -> None:
    value = convert_option_value(text)
    assert value == expected
    assert type(value) is type(expected)


def test_parse_engine_options_pairs() -> None:
    assert parse_engine_options(["--n_ctx", "4096", "--flash-attn", "off", "--kv_unified=false"]) == {
        "n_ctx": 4096,
        "flash_attn": "off",
        "kv_unified": False,
    }
    assert parse_engine_options([]) == {}
    assert parse_engine_options(["--n_gpu_layers", "-1"]) == {"n_gpu_layers": -1}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--n_ctx"], "needs a value"),
        (["--n_ctx", "4096", "--n_parallel"], "needs a value"),
        (["4096"], "unexpected argument"),
        (["--n_ctx", "1", "2"], "unexpected argument"),
        (["--", "1"], "unexpected argument"),
        (["--n..ctx", "1"], "not a valid engine option name"),  # dotted names (sampling.top_k) are valid
        (["--n_ctx", "1", "--n-ctx", "2"], "given twice"),
    ],
)
def test_parse_engine_options_rejects(args: list[str], needle: str) -> None:
    with pytest.raises(click.UsageError, match=needle):
        parse_engine_options(args)


def test_format_table_aligns_columns() -> None:
    table = format_table(["A", "Long header"], [["xxxxx", None], ["y", 3]])
    assert table.splitlines() == ["A      Long header", "xxxxx  -", "y      3"]


def test_launch_odd_leftover_is_a_usage_error() -> None:
    result = run("launch", "-e", "http://127.0.0.1:1", "-n", DEFAULT_MODEL, "--n_ctx")
    assert result.exit_code == 2
    assert "needs a value" in result.output


def test_launch_rejects_launch_fields_as_engine_options() -> None:
    result = run("launch", "-e", "http://127.0.0.1:1", "-n", DEFAULT_MODEL, "--n_gpu", "1")
    assert result.exit_code == 2
    assert "not an engine option" in result.output


def test_bad_n_gpu_is_a_usage_error() -> None:
    result = run("launch", "-e", "http://127.0.0.1:1", "-n", DEFAULT_MODEL, "--n-gpu", "lots")
    assert result.exit_code == 2
    assert "number of GPUs" in result.output


def test_dead_endpoint_prints_error_and_exits_1() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    result = run("list", "-e", dead)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ")
    assert dead in result.stderr
    assert "xinference-local" in result.stderr
    assert "Traceback" not in result.output


def test_help_lists_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for name in ("launch", "list", "terminate", "chat"):
        assert name in result.output


# -- against the real server --------------------------------------------------------------------------------


def test_list_shows_the_default_model(endpoint: str) -> None:
    result = run("list", "-e", endpoint)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["UID", "Type", "Name", "Engine", "Format", "Size", "Quantization", "Status"]
    row = next(line.split() for line in lines[1:] if line.split()[0] == DEFAULT_MODEL)
    assert row[1:4] == ["LLM", DEFAULT_MODEL, "llama.cpp"]


def test_endpoint_from_environment(endpoint: str) -> None:
    result = run("list", env={"XINFERENCE_ENDPOINT": endpoint})
    assert result.exit_code == 0, result.output
    assert DEFAULT_MODEL in result.stdout


def test_launch_list_terminate_second_instance(endpoint: str) -> None:
    launched = run(
        "launch", "-e", endpoint, "-n", DEFAULT_MODEL, "-en", "llama.cpp", "-u", SECOND_UID, "--n_ctx", "512"
    )
    try:
        assert launched.exit_code == 0, launched.output
        assert f"Model uid: {SECOND_UID}" in launched.stdout
        assert "Engine: llama.cpp" in launched.stdout

        listed = run("list", "-e", endpoint)
        assert listed.exit_code == 0, listed.output
        uids = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
        assert SECOND_UID in uids
        assert DEFAULT_MODEL in uids
    finally:
        terminated = run("terminate", "-e", endpoint, "-u", SECOND_UID)
    assert terminated.exit_code == 0, terminated.output

    listed = run("list", "-e", endpoint)
    uids = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert SECOND_UID not in uids
    assert DEFAULT_MODEL in uids


def test_launch_with_bad_engine_option_exits_1_naming_it(endpoint: str) -> None:
    result = run("launch", "-e", endpoint, "-n", DEFAULT_MODEL, "-u", "cli-bad", "--n_ctx", "notanumber")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "n_ctx" in result.stderr
    assert "Traceback" not in result.output


def test_terminate_unknown_uid_exits_1(endpoint: str) -> None:
    result = run("terminate", "-e", endpoint, "-u", "no-such-model")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "no-such-model" in result.stderr


def test_chat_reads_lines_until_exit(endpoint: str) -> None:
    result = run("chat", "-e", endpoint, "-u", DEFAULT_MODEL, "--max-tokens", "8", input="Hi\nexit\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(">>> ")
    assert result.stdout.count(">>> ") == 2
    reply = result.stdout.split(">>> ")[1]
    assert reply.strip(), result.stdout


def test_chat_keeps_history_and_ends_on_eof(endpoint: str) -> None:
    result = run(
        "chat",
        "-e",
        endpoint,
        "-u",
        DEFAULT_MODEL,
        "--max-tokens",
        "4",
        "--system",
        "Be brief.",
        input="Hi\n\nWhat is the capital of France?\n",
    )
    assert result.exit_code == 0, result.output
    # two turns answered (the blank line is skipped), then EOF at the third prompt
    assert result.stdout.count(">>> ") == 4


def test_chat_unknown_uid_exits_1_before_prompting(endpoint: str) -> None:
    result = run("chat", "-e", endpoint, "-u", "no-such-model", input="Hi\n")
    assert result.exit_code == 1
    assert ">>> " not in result.stdout
    assert "no-such-model" in result.stderr


def test_download_bar_shows_speed_and_time_left() -> None:
    assert rate_text({"progress": 0.3}) == ""  # not measured yet
    assert rate_text({"bytes_per_second": 5 * 1024 * 1024, "eta_seconds": 41.7}) == "5.0 MiB/s, 41s left"
    assert rate_text({"bytes_per_second": 2048.0, "eta_seconds": None}) == "2.0 KiB/s"
