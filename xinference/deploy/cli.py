"""``xinference``: launch, list, chat with and terminate models on a running server.

A thin layer over :class:`xinference.client.Client`: every command parses its options, makes client calls and
prints the result. Each command takes ``-e/--endpoint`` (default ``XINFERENCE_ENDPOINT``, else
http://127.0.0.1:9997) and ``--api-key`` (default ``XINFERENCE_API_KEY``). A failure prints ``Error: <message>``
on stderr and exits with status 1.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from xinference import __version__, settings
from xinference.cli import engines as engines_cli
from xinference.cli import ops as ops_cli
from xinference.client import Client, ClientError

__all__ = ["convert_option_value", "format_table", "main", "parse_engine_options"]

_F = TypeVar("_F", bound=Callable[..., Any])

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "none": None, "null": None}

#: Names ``launch`` sets itself; given as engine options they would be ambiguous.
_LAUNCH_FIELDS = frozenset(
    {"model_name", "model_engine", "model_uid", "model_type", "model_format", "model_size_in_billions",
     "quantization", "replica", "n_gpu", "model_path", "download_hub"}
)

_PROMPT = ">>> "
_QUIT = frozenset({"exit", "quit"})


# -- engine options -----------------------------------------------------------------------------------------


def convert_option_value(text: str) -> Any:
    """``"4096"`` -> 4096, ``"0.5"`` -> 0.5, ``"true"``/``"false"`` -> bool, ``"none"``/``"null"`` -> None.

    Anything else stays the string it was (``"auto"``, ``"q8_0"``).
    """
    lowered = text.strip().lower()
    if lowered in _CONSTANTS:
        return _CONSTANTS[lowered]
    if _INT.fullmatch(text.strip()):
        return int(text)
    if _FLOAT.fullmatch(text.strip()):
        return float(text)
    return text


def parse_engine_options(args: Sequence[str]) -> dict[str, Any]:
    """Turn leftover ``--name value`` (or ``--name=value``) pairs into engine launch options.

    Dashes in names become underscores (``--n-ctx`` is ``n_ctx``); dots reach nested engine parameters
    (``--sampling.top_k 20``). Raises :class:`click.UsageError` for a stray value, an option without a value, a
    name that is not an identifier (or dotted identifiers), or a name given twice.
    """
    options: dict[str, Any] = {}
    tokens = list(args)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token.strip("-") == "":
            raise click.UsageError(f"unexpected argument {token!r}; engine options are given as --name value")
        name, sep, value = token.lstrip("-").partition("=")
        if not sep:
            if i + 1 >= len(tokens):
                raise click.UsageError(f"engine option {token} needs a value")
            value = tokens[i + 1]
            i += 1
        i += 1
        key = name.replace("-", "_")
        if not all(part.isidentifier() for part in key.split(".")):
            raise click.UsageError(f"{token!r} is not a valid engine option name")
        if key in options:
            raise click.UsageError(f"engine option --{key} is given twice")
        options[key] = convert_option_value(value)
    return options


def _n_gpu(ctx: click.Context, param: click.Parameter, value: str) -> int | str | None:
    """``--n-gpu``: ``auto``, ``none`` (CPU only) or a number of GPUs."""
    text = value.strip().lower()
    if text == "auto":
        return "auto"
    if text in ("none", "null", "cpu"):
        return None
    if _INT.fullmatch(text) and int(text) >= 0:
        return int(text)
    raise click.BadParameter(f"{value!r} is not 'auto', 'none' or a number of GPUs")


# -- output -------------------------------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain left-aligned columns separated by two spaces; ``None`` cells show as ``-``."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[col]) for row in cells) for col in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


_LIST_COLUMNS = (
    ("UID", "model_uid"),
    ("Type", "model_type"),
    ("Name", "model_name"),
    ("Engine", "model_engine"),
    ("Format", "model_format"),
    ("Size", "model_size_in_billions"),
    ("Quantization", "quantization"),
    ("Status", "status"),
)


# -- shared plumbing ----------------------------------------------------------------------------------------


def _connection_options(command: _F) -> _F:
    command = click.option(
        "--api-key",
        envvar="XINFERENCE_API_KEY",
        default=None,
        help="API key, when the server requires one. [default: $XINFERENCE_API_KEY]",
    )(command)
    command = click.option(
        "-e",
        "--endpoint",
        default=lambda: settings.endpoint(),
        show_default=f"$XINFERENCE_ENDPOINT or {settings.DEFAULT_ENDPOINT}",
        help="Xinference server to talk to.",
    )(command)
    return command


@contextmanager
def _client(endpoint: str, api_key: str | None) -> Generator[Client, None, None]:
    """A client whose failures end the command with ``Error: ...`` and exit status 1."""
    try:
        with Client(endpoint, api_key=api_key) as client:
            yield client
    except ClientError as exc:
        click.echo(f"Error: {exc.message}", err=True)
        sys.exit(1)


# -- commands -----------------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xinference")
def main() -> None:
    """Manage and use models on a running Xinference server (start one with `xinference-local`)."""


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    epilog="Engine launch options are passed as extra --name value pairs, e.g. `--n_ctx 4096 --n_parallel 2`.",
)
@click.option("-n", "--model-name", required=True, help="Model name in the registry, e.g. smollm2-instruct.")
@click.option("-en", "--model-engine", default=None, help="Engine to run it with (llama.cpp, ...).")
@click.option("-u", "--model-uid", default=None, help="Uid for the running model. [default: the model name]")
@click.option("-t", "--model-type", default="LLM", show_default=True, help="Model type.")
@click.option("-s", "--size-in-billions", default=None, help="Model size in billions, e.g. 7 or 0_5.")
@click.option("-f", "--model-format", default=None, help="Weights format, e.g. ggufv2 or pytorch.")
@click.option("-q", "--quantization", default=None, help="Quantization, e.g. Q4_K_M.")
@click.option("-r", "--replica", default=1, show_default=True, type=click.IntRange(min=1), help="Replicas.")
@click.option(
    "--n-gpu", default="auto", show_default=True, metavar="auto|none|N", callback=_n_gpu, help="GPUs per replica."
)
@click.option("--model-path", default=None, help="Absolute path of local weights on the worker (overrides the hub).")
@click.option("--download-hub", type=click.Choice(["huggingface", "modelscope"]), default=None,
              help="Hub to download from. [default: $XINFERENCE_MODEL_SRC, else huggingface]")
@click.option("--persist", is_flag=True, default=False, help="Launch it again when the server restarts (autostart).")
@_connection_options
@click.pass_context
def launch(
    ctx: click.Context,
    model_name: str,
    model_engine: str | None,
    model_uid: str | None,
    model_type: str,
    size_in_billions: str | None,
    model_format: str | None,
    quantization: str | None,
    replica: int,
    n_gpu: Any,
    model_path: str | None,
    download_hub: str | None,
    persist: bool,
    endpoint: str,
    api_key: str | None,
) -> None:
    """Launch a model and wait until it is ready (a progress bar shows a download); prints its uid.

    Platform options ride along the same way: --keep_alive 10m, --max_queued 8, --queue_timeout 30."""
    engine_options = parse_engine_options(ctx.args)
    if persist:
        engine_options["autostart"] = True
    for key in engine_options.keys() & _LAUNCH_FIELDS:
        raise click.UsageError(f"--{key} is not an engine option; see `xinference launch --help` for its spelling")
    if model_path is not None:
        engine_options["model_path"] = model_path
    if download_hub is not None:
        engine_options["download_hub"] = download_hub
    with _client(endpoint, api_key) as client:
        uid = _launch_with_progress(
            client,
            api_key,
            model_uid or model_name,
            model_name=model_name,
            model_engine=model_engine,
            model_uid=model_uid,
            model_type=model_type,
            model_format=model_format,
            model_size_in_billions=size_in_billions,
            quantization=quantization,
            replica=replica,
            n_gpu=n_gpu,
            **engine_options,
        )
        engine = client.describe_model(uid).get("model_engine")
    click.echo(f"Model uid: {uid}")
    click.echo(f"Engine: {engine}")


def _launch_with_progress(client: Client, api_key: str | None, uid: str, **launch: Any) -> str:
    """``client.launch_model`` in a thread while this one polls the launch's progress and draws a bar on stderr
    once a download is under way. Ctrl-C cancels the launch."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["uid"] = client.launch_model(**launch)
        except BaseException as exc:  # noqa: BLE001 - handed back to the main thread below
            result["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    bar = _Bar()
    try:
        with Client(client.endpoint, api_key=api_key, timeout=5) as poller:
            while worker.is_alive():
                worker.join(0.5)
                if not worker.is_alive():
                    break
                try:
                    info = poller.get_launch_model_progress(uid)
                except ClientError:
                    continue  # not registered yet, or a transient error: keep waiting
                fraction = float(info.get("progress", 0.0))
                if 0.0 < fraction < 1.0 or bar.drawn:
                    bar.draw(fraction, _rate_text(info))
    except KeyboardInterrupt:
        click.echo("\ncancelling the launch...", err=True)
        try:
            client.cancel_launch_model(uid)
        except ClientError:
            pass
        worker.join(30)
        raise
    finally:
        if bar.drawn:
            bar.draw(1.0 if "uid" in result else bar.fraction)
            click.echo(err=True)
    if "error" in result:
        raise result["error"]
    return str(result["uid"])


class _Bar:
    """One ``\r``-redrawn line on stderr: ``Downloading [#####-----]  42.0%``."""

    width = 40

    def __init__(self) -> None:
        self.drawn = False
        self.fraction = 0.0

    def draw(self, fraction: float, extra: str = "") -> None:
        self.drawn, self.fraction = True, fraction
        done = int(fraction * self.width)
        click.echo(f"\rDownloading [{'#' * done}{'-' * (self.width - done)}] {fraction * 100:5.1f}% {extra:<24}",
                   nl=False, err=True)


def _rate_text(info: dict[str, Any]) -> str:
    """``"12.5 MiB/s, 40s left"`` from a progress answer's speed and ETA (empty until the server measured them)."""
    speed, eta = info.get("bytes_per_second"), info.get("eta_seconds")
    if not speed:
        return ""
    text = f"{_human_size(int(speed))}/s"
    return f"{text}, {int(eta)}s left" if isinstance(eta, (int, float)) else text


_CACHE_COLUMNS = ("ID", "Hub", "Repository", "Revision", "Models", "Files", "Size", "Worker")


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


@main.command()
@click.option("-n", "--model-name", default=None, help="Only the entries this model was launched from.")
@click.option("-w", "--worker-ip", default=None, help="Only this worker's cache.")
@_connection_options
def cached(model_name: str | None, worker_ip: str | None, endpoint: str, api_key: str | None) -> None:
    """List the downloaded weights in the model cache of every worker."""
    with _client(endpoint, api_key) as client:
        entries = client.list_cached_models(model_name=model_name, worker_ip=worker_ip)
    rows = []
    for e in entries:
        size = _human_size(int(e.get("size_bytes") or 0))
        if e.get("partial_bytes"):
            size += f" ({_human_size(int(e['partial_bytes']))} partial)"
        rows.append([e["id"], e["hub"], e["repo_id"], e.get("revision"), ",".join(e.get("model_names") or []) or None,
                     len(e.get("files") or []), size, e.get("worker")])
    click.echo(format_table(_CACHE_COLUMNS, rows))


@main.command("remove-cache")
@click.option("--entry", default=None, help="Cache entry id, as `xinference cached` lists it.")
@click.option("-n", "--model-name", default=None, help="Remove every entry this model was launched from.")
@click.option("-w", "--worker-ip", default=None, help="Only on this worker.")
@click.option("-y", "--yes", is_flag=True, default=False, help="Do not ask for confirmation.")
@_connection_options
def remove_cache(
    entry: str | None, model_name: str | None, worker_ip: str | None, yes: bool, endpoint: str, api_key: str | None
) -> None:
    """Delete downloaded weights from the model cache (by entry id, or by model name)."""
    if bool(entry) == bool(model_name):
        raise click.UsageError("give exactly one of --entry or --model-name")
    with _client(endpoint, api_key) as client:
        if not yes:
            found = [e for e in client.list_cached_models(model_name=model_name, worker_ip=worker_ip)
                     if entry in (None, e["id"])]
            if not found:
                click.echo("Error: nothing in the cache matches", err=True)
                sys.exit(1)
            for e in found:
                click.echo(f"{e['id']}  {_human_size(int(e.get('size_bytes') or 0))}  on {e.get('worker')}")
            click.confirm("Remove these cache entries?", abort=True)
        removed = client.remove_cached_model(entry=entry, model_name=model_name, worker_ip=worker_ip)
    for r in removed:
        click.echo(f"Removed {r['id']} ({_human_size(int(r['freed_bytes']))}) on {r['worker']}.")


@main.command("list")
@_connection_options
def list_models(endpoint: str, api_key: str | None) -> None:
    """List the running models."""
    with _client(endpoint, api_key) as client:
        models = client.list_models()
    rows = [[model.get(key) for _, key in _LIST_COLUMNS] for model in models]
    click.echo(format_table([title for title, _ in _LIST_COLUMNS], rows))


@main.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running model.")
@_connection_options
def terminate(model_uid: str, endpoint: str, api_key: str | None) -> None:
    """Stop a running model (every replica)."""
    with _client(endpoint, api_key) as client:
        client.terminate_model(model_uid)
    click.echo(f"Model {model_uid} terminated.")


@main.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding or rerank.")
@click.option("--file", "spec_file", required=True, type=click.File("r", encoding="utf-8"), help="Spec JSON file.")
@click.option("--persist/--no-persist", default=False, show_default=True, help="Keep it across restarts.")
@_connection_options
def register(model_type: str, spec_file: Any, persist: bool, endpoint: str, api_key: str | None) -> None:
    """Register a custom model from a JSON spec file."""
    text = spec_file.read()
    with _client(endpoint, api_key) as client:
        client.register_model(model_type, text, persist=persist)
    click.echo("Model registered." + (" (persisted)" if persist else ""))


@main.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding or rerank.")
@click.option("-n", "--model-name", required=True, help="Name of the registered model.")
@_connection_options
def unregister(model_type: str, model_name: str, endpoint: str, api_key: str | None) -> None:
    """Remove a custom model registration."""
    with _client(endpoint, api_key) as client:
        client.unregister_model(model_type, model_name)
    click.echo(f"Model {model_name} unregistered.")


@main.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding or rerank.")
@_connection_options
def registrations(model_type: str, endpoint: str, api_key: str | None) -> None:
    """List the models that can be launched (built-in and custom)."""
    with _client(endpoint, api_key) as client:
        entries = client.list_model_registrations(model_type)
    rows = [[e["model_name"], "built-in" if e["is_builtin"] else "custom"] for e in entries]
    click.echo(format_table(["Name", "Origin"], rows))


engines_cli.attach(main, _connection_options, _client, format_table)
ops_cli.attach(main, _connection_options, _client, format_table)  # logs, unload, load, devices, launch-history


@main.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running chat model.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Longest reply, in tokens.")
@click.option("--system", default=None, help="System prompt for the conversation.")
@_connection_options
def chat(model_uid: str, max_tokens: int | None, system: str | None, endpoint: str, api_key: str | None) -> None:
    """Chat with a running model, streaming each reply.

    Type a line at the `>>>` prompt; the conversation so far is sent with each turn. `exit`, `quit` or Ctrl-D
    ends the session.
    """
    history: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    params: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    with _client(endpoint, api_key) as client:
        client.describe_model(model_uid)  # an unknown uid fails now, not after the first line
        for line in _read_turns():
            history.append({"role": "user", "content": line})
            try:
                reply = _stream_reply(client.chat(model_uid, history, stream=True, **params))
            except ClientError as exc:
                if not _is_request_error(exc):
                    raise
                click.echo(f"Error: {exc.message}", err=True)
                history.pop()  # drop the turn the model could not take, keep the conversation going
                continue
            history.append({"role": "assistant", "content": reply})


def _read_turns() -> Iterator[str]:
    """User lines from stdin until EOF, ``exit`` or ``quit``; blank lines are skipped."""
    while True:
        try:
            line = input(_PROMPT).strip()
        except EOFError:
            click.echo()
            return
        except KeyboardInterrupt:
            click.echo()
            return
        if line.lower() in _QUIT:
            return
        if line:
            yield line


def _stream_reply(chunks: Iterator[dict[str, Any]]) -> str:
    """Print the content deltas as they come; returns the whole reply. Ctrl-C cuts the reply short."""
    parts: list[str] = []
    try:
        for chunk in chunks:
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    parts.append(text)
                    click.echo(text, nl=False)
                    sys.stdout.flush()
    except KeyboardInterrupt:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    finally:
        click.echo()
    return "".join(parts)


def _is_request_error(exc: ClientError) -> bool:
    """A rejected turn (too long, bad option) rather than a broken server or connection."""
    return exc.status_code == 400 or (exc.status_code is None and exc.error_type == "invalid_request_error")


if __name__ == "__main__":
    main()
