"""The fields of a launch, defined once: the supervisor's :class:`LaunchRequest`, the API's
``LaunchModelRequest.to_launch`` and ``xinference launch`` all read them from here.

A launch request is its platform fields (below) plus ``engine_kwargs``, the engine's own options. Fields marked
``cli_option`` are set by ``xinference launch``'s own options, so the CLI refuses them as ``--name value`` engine
options; the others ride along that way (``--keep_alive 10m``). Kept free of actors and engines, so the API
protocol and the CLI can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["CLI_OPTION_FIELDS", "LAUNCH_FIELDS", "LaunchRequest"]

_CLI = {"cli_option": True}


@dataclass
class LaunchRequest:
    """A validated launch, as the API hands it over (see ``api/protocol/models.py``)."""

    model_name: str = field(metadata=_CLI)
    model_type: str = field(default="LLM", metadata=_CLI)
    model_engine: str | None = field(default=None, metadata=_CLI)
    model_uid: str | None = field(default=None, metadata=_CLI)
    model_format: str | None = field(default=None, metadata=_CLI)
    model_size_in_billions: int | str | None = field(default=None, metadata=_CLI)
    quantization: str | None = field(default=None, metadata=_CLI)
    replica: int = field(default=1, metadata=_CLI)
    n_gpu: int | str | None = field(default="auto", metadata=_CLI)
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    ignore_memory_check: bool = False
    model_path: str | None = field(default=None, metadata=_CLI)
    download_hub: str | None = field(default=None, metadata=_CLI)
    worker_ip: str | None = None
    gpu_idx: list[int] | int | None = None
    # -- operations (issue 12): keep-alive, admission limits, autostart after a restart
    keep_alive: Any = None
    max_queued: int | None = None
    queue_timeout: float | None = None
    autostart: bool = False


#: Every platform field of a launch, in declaration order (``engine_kwargs`` is not one: it holds the rest).
LAUNCH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(LaunchRequest) if f.name != "engine_kwargs")
#: The fields ``xinference launch`` sets from its own options.
CLI_OPTION_FIELDS: frozenset[str] = frozenset(f.name for f in fields(LaunchRequest) if f.metadata.get("cli_option"))
