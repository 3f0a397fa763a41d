"""``xinference cached`` and ``remove-cache``: the downloaded weights in every worker's model cache."""

from __future__ import annotations

import sys

import click

from xinference.cli.options import client_session, connection_options
from xinference.cli.output import format_table, human_size

__all__ = ["COMMANDS"]

_CACHE_COLUMNS = ("ID", "Hub", "Repository", "Revision", "Models", "Files", "Size", "Worker")


@click.command()
@click.option("-n", "--model-name", default=None, help="Only the entries this model was launched from.")
@click.option("-w", "--worker-ip", default=None, help="Only this worker's cache.")
@connection_options
def cached(model_name: str | None, worker_ip: str | None, endpoint: str, api_key: str | None) -> None:
    """List the downloaded weights in the model cache of every worker."""
    with client_session(endpoint, api_key) as client:
        entries = client.list_cached_models(model_name=model_name, worker_ip=worker_ip)
    rows = []
    for e in entries:
        size = human_size(int(e.get("size_bytes") or 0))
        if e.get("partial_bytes"):
            size += f" ({human_size(int(e['partial_bytes']))} partial)"
        rows.append(
            [
                e["id"],
                e["hub"],
                e["repo_id"],
                e.get("revision"),
                ",".join(e.get("model_names") or []) or None,
                len(e.get("files") or []),
                size,
                e.get("worker"),
            ]
        )
    click.echo(format_table(_CACHE_COLUMNS, rows))


@click.command("remove-cache")
@click.option("--entry", default=None, help="Cache entry id, as `xinference cached` lists it.")
@click.option("-n", "--model-name", default=None, help="Remove every entry this model was launched from.")
@click.option("-w", "--worker-ip", default=None, help="Only on this worker.")
@click.option("-y", "--yes", is_flag=True, default=False, help="Do not ask for confirmation.")
@connection_options
def remove_cache(
    entry: str | None, model_name: str | None, worker_ip: str | None, yes: bool, endpoint: str, api_key: str | None
) -> None:
    """Delete downloaded weights from the model cache (by entry id, or by model name)."""
    if bool(entry) == bool(model_name):
        raise click.UsageError("give exactly one of --entry or --model-name")
    with client_session(endpoint, api_key) as client:
        if not yes:
            found = [
                e
                for e in client.list_cached_models(model_name=model_name, worker_ip=worker_ip)
                if entry in (None, e["id"])
            ]
            if not found:
                click.echo("Error: nothing in the cache matches", err=True)
                sys.exit(1)
            for e in found:
                click.echo(f"{e['id']}  {human_size(int(e.get('size_bytes') or 0))}  on {e.get('worker')}")
            click.confirm("Remove these cache entries?", abort=True)
        removed = client.remove_cached_model(entry=entry, model_name=model_name, worker_ip=worker_ip)
    for r in removed:
        click.echo(f"Removed {r['id']} ({human_size(int(r['freed_bytes']))}) on {r['worker']}.")


#: The commands this module adds to ``xinference``.
COMMANDS: tuple[click.Command, ...] = (cached, remove_cache)
