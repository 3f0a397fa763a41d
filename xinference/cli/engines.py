"""``xinference engine``: which engines can run a model, and their environments (install, uninstall, list).

``xinference engine -n MODEL`` keeps its meaning (the engine matrix of a model, as in Xinference); the sub-commands
manage engine environments on the server's workers, or with ``--local`` on this machine without a server.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import click

from xinference.cli.options import client_session, connection_options
from xinference.cli.output import format_table

__all__ = ["engine"]

_POLL_S = 1.0


@click.group(invoke_without_command=True)
@click.option("-n", "--model-name", default=None, help="Model name in the registry, e.g. smollm2-instruct.")
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding, rerank, audio or image.")
@connection_options
@click.pass_context
def engine(ctx: click.Context, model_name: str | None, model_type: str, endpoint: str, api_key: str | None) -> None:
    """Which engines can run a model (-n MODEL), and the engines' own environments (install, uninstall, list)."""
    if ctx.invoked_subcommand is not None:
        return
    if model_name is None:
        raise click.UsageError("give -n MODEL, or a sub-command (list, install, uninstall)")
    with client_session(endpoint, api_key) as client:
        table = client.query_engine_by_model_name(model_name, model_type)
    click.echo(
        format_table(["Engine", "Format", "Size", "Quantizations", "Hub", "Cannot run because"], _matrix_rows(table))
    )


@engine.command("list")
@connection_options
def list_engines(endpoint: str, api_key: str | None) -> None:
    """Every engine and whether each worker can run it (or the command that installs it)."""
    with client_session(endpoint, api_key) as client:
        listing = client.list_engines()
    rows = [
        [name, worker, "yes" if not reason else reason]
        for name, workers in listing.items()
        for worker, reason in workers.items()
    ]
    click.echo(format_table(["Engine", "Worker", "Available"], rows))


@engine.command("install")
@click.argument("name")
@click.option("-w", "--worker-ip", default=None, help="Only on this worker. [default: every worker]")
@click.option("--force", is_flag=True, default=False, help="Reinstall even when installed.")
@click.option(
    "--local", "local_only", is_flag=True, default=False, help="Install on this machine directly, without a server."
)
@connection_options
def install(
    name: str, worker_ip: str | None, force: bool, local_only: bool, endpoint: str, api_key: str | None
) -> None:
    """Create NAME's environment (vLLM, SGLang, MLX ...) with the packages it needs on each worker's hardware."""
    if local_only:
        _install_here(name, force)
        return
    with client_session(endpoint, api_key) as client:
        report = client.install_engine(name, worker_ip=worker_ip, force=force)
        seen: dict[str, int] = {}
        while True:
            for status in report["workers"]:
                _echo_progress(status, seen)
            if not any(w["installing"] for w in report["workers"]):
                break
            time.sleep(_POLL_S)
            report = client.engine_install_status(name, worker_ip=worker_ip)
    failed = [w for w in report["workers"] if w.get("error") or not w.get("installed")]
    for status in report["workers"]:
        packages = ", ".join(f"{k} {v}" for k, v in (status.get("packages") or {}).items())
        state = "installed" if status.get("installed") else f"failed: {status.get('error')}"
        click.echo(f"{status['worker']}: {report['engine']} {state}" + (f" ({packages})" if packages else ""))
    if failed:
        sys.exit(1)


@engine.command("uninstall")
@click.argument("name")
@click.option("-w", "--worker-ip", default=None, help="Only on this worker. [default: every worker]")
@click.option(
    "--local", "local_only", is_flag=True, default=False, help="Remove it from this machine directly, without a server."
)
@connection_options
def uninstall(name: str, worker_ip: str | None, local_only: bool, endpoint: str, api_key: str | None) -> None:
    """Remove NAME's environment (models running on it must be terminated first)."""
    if local_only:
        from xinference.engines import envs
        from xinference.engines.registry import resolve_engine_name

        canonical = resolve_engine_name(name)
        click.echo(f"{canonical}: {'removed' if envs.uninstall(canonical) else 'was not installed'}")
        return
    with client_session(endpoint, api_key) as client:
        report = client.uninstall_engine(name, worker_ip=worker_ip)
    for status in report["workers"]:
        click.echo(
            f"{status['worker']}: {report['engine']} {'removed' if status.get('removed') else 'was not installed'}"
        )


def _matrix_rows(table: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for name, verdict in table.items():
        if isinstance(verdict, str):
            rows.append([name, None, None, None, None, verdict])
            continue
        for params in verdict:
            quantizations = ", ".join(str(q) for q in params.get("quantizations", []))
            rows.append(
                [
                    name,
                    params.get("model_format"),
                    params.get("model_size_in_billions"),
                    quantizations,
                    params.get("model_hub"),
                    None,
                ]
            )
    return rows


def _echo_progress(status: dict[str, Any], seen: dict[str, int]) -> None:
    """Print each install stage a worker went through once (one line per stage, not per pip line), including
    stages that began and ended between two polls; ``seen`` counts the stages printed per worker."""
    stages = status.get("stages") or []
    worker = status["worker"]
    for entry in stages[seen.get(worker, 0) :]:
        click.echo(f"{worker}: [{entry['stage']}] {entry['message']}".rstrip()[:200])
    seen[worker] = len(stages)


def _install_here(name: str, force: bool) -> None:
    """Install on this machine, in this process, printing each stage."""
    from xinference.core.env_jobs import EnvJobs
    from xinference.engines import envs
    from xinference.errors import XinferenceError

    try:
        canonical, recipe = EnvJobs().recipe_for(name)
    except XinferenceError as exc:
        raise click.ClickException(exc.message) from None
    last = {"stage": ""}
    lock = threading.Lock()

    def on_progress(progress: envs.InstallProgress) -> None:
        with lock:
            if progress.stage != last["stage"]:
                last["stage"] = progress.stage
                click.echo(f"[{progress.stage}] {progress.message}"[:200])

    click.echo(f"installing {canonical} into {envs.env_dir(canonical)}: {' '.join(recipe.packages)}")
    try:
        found = envs.install(canonical, recipe, on_progress, force=force)
    except XinferenceError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"{canonical} installed ({len(found.get('distributions', {}))} packages)")
