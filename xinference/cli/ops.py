"""``xinference logs``, ``unload``, ``load``, ``devices`` and ``launch-history``: operating running models.

``xinference logs UID -f`` follows a replica's log through ``GET /v1/models/{uid}/logs`` (the server reads it on
the worker that runs the replica, so it works in a cluster too), passing back each answer's ``offset``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from xinference.cli.options import client_session, connection_options
from xinference.cli.output import format_table

__all__ = ["COMMANDS", "FOLLOW_INTERVAL_S", "follow_log"]

#: Seconds between two reads of a followed log (the web UI's Logs page polls as often).
FOLLOW_INTERVAL_S = 1.0


def follow_log(
    client: Any,
    model_uid: str,
    replica: str | None,
    tail: int,
    follow: bool,
    echo: Callable[[str], None],
    interval: float = FOLLOW_INTERVAL_S,
    rounds: int | None = None,
) -> None:
    """Print the last ``tail`` lines, then (``follow``) what is written after them until interrupted or, when
    ``rounds`` is given, after that many further reads."""
    piece = client.get_model_logs(model_uid, replica=replica, tail=tail)
    for line in piece["lines"]:
        echo(line)
    done = 0
    while follow and (rounds is None or done < rounds):
        time.sleep(interval)
        done += 1
        piece = client.get_model_logs(model_uid, replica=piece["replica_uid"], tail=5000, since=piece["offset"])
        if piece["reset"]:
            echo("--- the log was truncated (the replica restarted) ---")
        for line in piece["lines"]:
            echo(line)


@click.command("logs")
@click.argument("model_uid")
@click.option("-f", "--follow", is_flag=True, default=False, help="Keep printing what the replica writes.")
@click.option("-r", "--replica", default=None, help="Replica index (0, 1, ...) or uid. [default: the first]")
@click.option(
    "-n",
    "--tail",
    default=200,
    show_default=True,
    type=click.IntRange(0, 5000),
    help="How many of the last lines to print first.",
)
@connection_options
def logs(model_uid: str, follow: bool, replica: str | None, tail: int, endpoint: str, api_key: str | None) -> None:
    """Print a model replica's log (engine output included), read on its worker; -f follows it."""
    with client_session(endpoint, api_key) as client:
        try:
            follow_log(client, model_uid, replica, tail, follow, click.echo)
        except KeyboardInterrupt:
            pass


@click.command("unload")
@click.argument("model_uid")
@connection_options
def unload(model_uid: str, endpoint: str, api_key: str | None) -> None:
    """End a model's processes now (memory freed); it stays listed and loads again on its next request."""
    with client_session(endpoint, api_key) as client:
        info = client.unload_model(model_uid)
    click.echo(f"{model_uid}: {info['status']}")


@click.command("load")
@click.argument("model_uid")
@connection_options
def load(model_uid: str, endpoint: str, api_key: str | None) -> None:
    """Load a model that keep-alive (or `xinference unload`) unloaded; returns once it serves."""
    with client_session(endpoint, api_key) as client:
        info = client.load_model(model_uid)
    click.echo(f"{model_uid}: {info['status']}")


@click.command("devices")
@connection_options
def devices(endpoint: str, api_key: str | None) -> None:
    """Every worker's GPUs: memory total and used, and which replicas hold each."""
    with client_session(endpoint, api_key) as client:
        found = client.list_devices()
    if not found:
        click.echo("no GPU on any worker")
        return
    gib = 2**30
    rows = [
        [
            d["worker"],
            d["index"],
            d["name"],
            f"{d['memory_used_bytes'] / gib:.1f}",
            f"{d['memory_total_bytes'] / gib:.1f}",
            ", ".join(d["models"]) or "-",
        ]
        for d in found
    ]
    click.echo(format_table(["Worker", "GPU", "Name", "Used GiB", "Total GiB", "Replicas"], rows))


@click.command("launch-history")
@connection_options
def launch_history(endpoint: str, api_key: str | None) -> None:
    """Models launched on this server, newest first, and whether they come back after a restart."""
    with client_session(endpoint, api_key) as client:
        entries = client.get_launch_history()
    rows = [
        [
            e["model_uid"],
            e.get("model_name") or "",
            e.get("model_engine") or "",
            "yes" if e.get("autostart") else "no",
            e.get("status", ""),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(e.get("launched_at") or 0)),
        ]
        for e in entries
    ]
    click.echo(format_table(["UID", "Name", "Engine", "Autostart", "Status", "Launched"], rows))


#: The commands this module adds to ``xinference``.
COMMANDS: tuple[click.Command, ...] = (logs, unload, load, devices, launch_history)
