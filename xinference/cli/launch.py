"""``xinference launch``: start a model on the server and wait until it serves, drawing download progress.

The launch request blocks until the model is ready, so it runs in a thread while the main thread polls the
launch's progress with a second client and draws a bar once a download is under way. Ctrl-C cancels the launch
on the server before the command ends.
"""

from __future__ import annotations

import threading
from typing import Any

import click

from xinference.cli.options import client_session, connection_options, parse_engine_options
from xinference.cli.output import ProgressBar, human_size
from xinference.client import Client, ClientError
from xinference.core.launch import CLI_OPTION_FIELDS, check_gpu_idx, check_n_gpu

__all__ = ["launch", "rate_text"]

#: Names ``launch`` sets itself; given as engine options they would be ambiguous (one list: core/launch.py).
_LAUNCH_FIELDS = CLI_OPTION_FIELDS


def _n_gpu(ctx: click.Context, param: click.Parameter, value: str) -> int | str | None:
    """``--n-gpu``: ``auto``, ``none`` (CPU only) or a number of GPUs."""
    text = value.strip().lower()
    if text == "auto":
        return "auto"
    if text in ("none", "null", "cpu"):
        return None
    if text.lstrip("+").isascii() and text.lstrip("+").isdigit():
        try:
            return check_n_gpu(int(text))  # the API's own rule: a usage error here rather than a 400 there
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    raise click.BadParameter(f"{value!r} is not 'auto', 'none' or a number of GPUs")


def _gpu_idx(value: Any) -> int | list[int]:
    """``--gpu_idx 0,1`` (as the web UI's "same as CLI" line writes it): the API wants a list of ints, and the
    generic option parser leaves ``0,1`` a string. One index stays an int."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        indices: int | list[int] = value
    else:
        words = [w.strip() for w in str(value).split(",")]
        if not all(w.isascii() and w.isdigit() for w in words):
            raise click.UsageError(f"--gpu_idx takes GPU indices separated by commas (e.g. 0,1), not {value!r}")
        indices = [int(w) for w in words]
    try:
        check_gpu_idx(indices)  # the API's own rule (no duplicates, a sane range)
    except ValueError as exc:
        raise click.UsageError(f"--gpu_idx: {exc}") from None
    return indices


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    epilog="Engine launch options are passed as extra --name value pairs, e.g. `--n_ctx 4096 --n_parallel 2`.",
)
@click.option("-n", "--model-name", required=True, help="Model name in the registry, e.g. smollm2-instruct.")
@click.option("-en", "--model-engine", default=None, help="Engine to run it with (llama.cpp, ...).")
@click.option("-u", "--model-uid", default=None, help="Uid for the running model. [default: the model name]")
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding, rerank, audio or image.")
@click.option("-s", "--size-in-billions", default=None, help="Model size in billions, e.g. 7 or 0_5.")
@click.option("-f", "--model-format", default=None, help="Weights format, e.g. ggufv2 or pytorch.")
@click.option("-q", "--quantization", default=None, help="Quantization, e.g. Q4_K_M.")
@click.option("-r", "--replica", default=1, show_default=True, type=click.IntRange(min=1), help="Replicas.")
@click.option(
    "--n-gpu", default="auto", show_default=True, metavar="auto|none|N", callback=_n_gpu, help="GPUs per replica."
)
@click.option("--model-path", default=None, help="Absolute path of local weights on the worker (overrides the hub).")
@click.option(
    "--download-hub",
    type=click.Choice(["huggingface", "modelscope"]),
    default=None,
    help="Hub to download from. [default: $XINFERENCE_MODEL_SRC, else huggingface]",
)
@click.option("--persist", is_flag=True, default=False, help="Launch it again when the server restarts (autostart).")
@connection_options
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

    Platform options ride along the same way: --keep_alive 10m, --max_queued 8, --queue_timeout 30,
    --worker_ip host:port, --gpu_idx 0,1."""
    engine_options = parse_engine_options(ctx.args)
    if persist:
        engine_options["autostart"] = True
    for key in engine_options.keys() & _LAUNCH_FIELDS:
        raise click.UsageError(f"--{key} is not an engine option; see `xinference launch --help` for its spelling")
    if "gpu_idx" in engine_options:
        engine_options["gpu_idx"] = _gpu_idx(engine_options["gpu_idx"])
    if model_path is not None:
        engine_options["model_path"] = model_path
    if download_hub is not None:
        engine_options["download_hub"] = download_hub
    with client_session(endpoint, api_key) as client:
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
    bar = ProgressBar()
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
                    bar.draw(fraction, rate_text(info))
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


def rate_text(info: dict[str, Any]) -> str:
    """``"12.5 MiB/s, 40s left"`` from a progress answer's speed and ETA (empty until the server measured them)."""
    speed, eta = info.get("bytes_per_second"), info.get("eta_seconds")
    if not speed:
        return ""
    text = f"{human_size(int(speed))}/s"
    return f"{text}, {int(eta)}s left" if isinstance(eta, (int, float)) else text
