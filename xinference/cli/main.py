"""``xinference``: launch, list, chat with and terminate models on a running server.

A thin layer over :class:`xinference.client.Client`: every command parses its options, makes client calls and
prints the result. This module only builds the click group from the command modules beside it (one job each:
``launch``, ``models``, ``cache``, ``chat``, ``audio``, ``engines``, ``ops``); the options every command shares are in
``options``, the printing helpers in ``output``. Run it as ``xinference`` or ``python -m xinference.cli``.
"""

from __future__ import annotations

import click

from xinference import __version__
from xinference.cli import audio, cache, engines, mcp, models, ops
from xinference.cli.chat import chat
from xinference.cli.launch import launch

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xinference")
def main() -> None:
    """Manage and use models on a running Xinference server (start one with `xinference-local`)."""


for _command in (
    launch,
    *cache.COMMANDS,
    *models.COMMANDS,
    engines.engine,
    *ops.COMMANDS,
    chat,
    *audio.COMMANDS,
    *mcp.COMMANDS,
):
    main.add_command(_command)
