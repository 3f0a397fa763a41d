"""``xinference chat``: a line-by-line REPL against a running chat model, streaming each reply.

The whole conversation is sent with every turn. A turn the server rejects (too long, a bad option) prints the
error and is dropped from the history, so the session goes on; a broken server or connection ends the command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from xinference.cli.options import client_session, connection_options
from xinference.client import ClientError

__all__ = ["chat"]

_PROMPT = ">>> "
_QUIT = frozenset({"exit", "quit"})


@click.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running chat model.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Longest reply, in tokens.")
@click.option("--system", default=None, help="System prompt for the conversation.")
@connection_options
def chat(model_uid: str, max_tokens: int | None, system: str | None, endpoint: str, api_key: str | None) -> None:
    """Chat with a running model, streaming each reply.

    Type a line at the `>>>` prompt; the conversation so far is sent with each turn. `exit`, `quit` or Ctrl-D
    ends the session.
    """
    history: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    params: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    with client_session(endpoint, api_key) as client:
        client.describe_model(model_uid)  # an unknown uid fails now, not after the first line
        for line in _read_turns():
            history.append({"role": "user", "content": line})
            try:
                reply = _stream_reply(client.chat_completion(model_uid, history, stream=True, **params))
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
        except (EOFError, KeyboardInterrupt):
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
