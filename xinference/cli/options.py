"""What every ``xinference`` command shares: the connection options, the client session, engine-option parsing.

Each command that talks to a server takes ``-e/--endpoint`` (default ``XINFERENCE_ENDPOINT``, else
http://127.0.0.1:9997) and ``--api-key`` (default ``XINFERENCE_API_KEY``) through :func:`connection_options`,
and opens its client with :func:`client_session`, so a server-side failure ends every command the same way:
``Error: <message>`` on stderr and exit status 1.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from xinference import settings
from xinference.client import Client, ClientError

__all__ = ["client_session", "connection_options", "convert_option_value", "parse_engine_options"]

_F = TypeVar("_F", bound=Callable[..., Any])

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "none": None, "null": None}


def connection_options(command: _F) -> _F:
    """Add ``-e/--endpoint`` and ``--api-key`` to a command; it then receives ``endpoint`` and ``api_key``."""
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
def client_session(endpoint: str, api_key: str | None) -> Generator[Client, None, None]:
    """A client for one command; a :class:`ClientError` inside ends the command with ``Error: ...`` and exit
    status 1 (a usage error or Ctrl-C passes through unchanged)."""
    try:
        with Client(endpoint, api_key=api_key) as client:
            yield client
    except ClientError as exc:
        click.echo(f"Error: {exc.message}", err=True)
        sys.exit(1)


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
