"""``xinference list``, ``terminate``, ``register``, ``unregister`` and ``registrations``: the running models and
the registry of launchable ones."""

from __future__ import annotations

from typing import Any

import click

from xinference.cli.options import client_session, connection_options
from xinference.cli.output import format_table

__all__ = ["COMMANDS"]

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


@click.command("list")
@connection_options
def list_models(endpoint: str, api_key: str | None) -> None:
    """List the running models."""
    with client_session(endpoint, api_key) as client:
        models = client.list_models()
    rows = [[model.get(key) for _, key in _LIST_COLUMNS] for model in models.values()]
    click.echo(format_table([title for title, _ in _LIST_COLUMNS], rows))


@click.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running model.")
@connection_options
def terminate(model_uid: str, endpoint: str, api_key: str | None) -> None:
    """Stop a running model (every replica)."""
    with client_session(endpoint, api_key) as client:
        client.terminate_model(model_uid)
    click.echo(f"Model {model_uid} terminated.")


@click.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding, rerank, audio or image.")
@click.option("--file", "spec_file", required=True, type=click.File("r", encoding="utf-8"), help="Spec JSON file.")
@click.option("--persist/--no-persist", default=False, show_default=True, help="Keep it across restarts.")
@connection_options
def register(model_type: str, spec_file: Any, persist: bool, endpoint: str, api_key: str | None) -> None:
    """Register a custom model from a JSON spec file."""
    text = spec_file.read()
    with client_session(endpoint, api_key) as client:
        client.register_model(model_type, text, persist=persist)
    click.echo("Model registered." + (" (persisted)" if persist else ""))


@click.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding, rerank, audio or image.")
@click.option("-n", "--model-name", required=True, help="Name of the registered model.")
@connection_options
def unregister(model_type: str, model_name: str, endpoint: str, api_key: str | None) -> None:
    """Remove a custom model registration."""
    with client_session(endpoint, api_key) as client:
        client.unregister_model(model_type, model_name)
    click.echo(f"Model {model_name} unregistered.")


@click.command()
@click.option("-t", "--model-type", default="LLM", show_default=True, help="LLM, embedding, rerank, audio or image.")
@connection_options
def registrations(model_type: str, endpoint: str, api_key: str | None) -> None:
    """List the models that can be launched (built-in and custom)."""
    with client_session(endpoint, api_key) as client:
        entries = client.list_model_registrations(model_type)
    rows = [[e["model_name"], "built-in" if e["is_builtin"] else "custom"] for e in entries]
    click.echo(format_table(["Name", "Origin"], rows))


#: The commands this module adds to ``xinference``.
COMMANDS: tuple[click.Command, ...] = (list_models, terminate, register, unregister, registrations)
