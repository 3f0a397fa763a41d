"""The fields of a launch, defined once: the supervisor's :class:`LaunchRequest`, the API's
``LaunchModelRequest.to_launch`` and ``xinference launch`` all read them from here.

A launch request is its platform fields (below) plus ``engine_kwargs``, the engine's own options. Fields marked
``cli_option`` are set by ``xinference launch``'s own options, so the CLI refuses them as ``--name value`` engine
options; the others ride along that way (``--keep_alive 10m``). Kept free of actors and engines, so the API
protocol and the CLI can import it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

from xinference.core.keepalive import MAX_KEEP_ALIVE_SECONDS, parse_keep_alive
from xinference.errors import InvalidRequest

__all__ = [
    "CLI_OPTION_FIELDS",
    "LAUNCH_FIELDS",
    "MAX_GPUS",
    "MAX_KEEP_ALIVE_SECONDS",
    "LaunchRequest",
    "check_gpu_idx",
    "check_keep_alive",
    "check_model_size",
    "check_n_gpu",
]

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


# -- the values a launch field may take ------------------------------------------------------------------------------
# Pure checks, shared by the API's request models and the CLI, so a wrong value is refused where it enters (a 400 or
# a usage error naming the field) and placement, the registry and keep-alive only ever see values they handle.
# Each raises ValueError saying what the field takes, and returns the value unchanged.

#: GPUs per replica, and GPU indices, beyond which a value is taken for a mistake (no machine has that many).
MAX_GPUS = 1024
#: A model size in billions as the catalog spells it (``7``, ``0_5``) or as people write it (``1.5``).
_SIZE_TEXT = re.compile(r"\d{1,6}(?:[._]\d{1,6})?")


def _is_int(value: Any) -> bool:
    """An int that is not a bool (JSON's ``true`` is no number of GPUs)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_n_gpu(value: Any) -> int | str | None:
    """``n_gpu``: ``"auto"``, null (CPU only) or a number of GPUs per replica, 0 to :data:`MAX_GPUS`."""
    if value is None or value == "auto" or (_is_int(value) and 0 <= value <= MAX_GPUS):
        return value  # type: ignore[no-any-return]
    raise ValueError(f"n_gpu is 'auto', null (CPU only) or a number of GPUs from 0 to {MAX_GPUS}, "
                     f"not {_shown(value)}")


def check_gpu_idx(value: Any) -> int | list[int] | None:
    """``gpu_idx``: null, a GPU index, or a non-empty list of distinct GPU indices (0 to ``MAX_GPUS - 1``)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_GPUS or not all(_is_int(i) and 0 <= i < MAX_GPUS for i in items):
        raise ValueError(f"gpu_idx is a GPU index or a non-empty list of GPU indices (0 to {MAX_GPUS - 1}), "
                         f"not {_shown(value)}")
    if len(set(items)) != len(items):
        raise ValueError(f"gpu_idx lists a GPU twice: {items}")
    return value  # type: ignore[no-any-return]


def check_keep_alive(value: Any) -> str | int | float | None:
    """``keep_alive``: null (the server's default), a duration like ``"10m"``, a number of seconds, or a negative
    number (forever); finite and at most :data:`MAX_KEEP_ALIVE_SECONDS`."""
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"keep_alive is a duration like '10m', a number of seconds, or -1 (forever), "
                         f"not {_shown(value)}")
    try:
        number = float(value)
    except ValueError:
        number = 0.0  # a duration like "10m": parse_keep_alive checks it
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):  # "-inf" is no way to say forever, nor "nan" a duration
        raise ValueError(f"keep_alive must be finite, not {_shown(value)}; -1 keeps the model loaded forever")
    try:
        seconds = parse_keep_alive(value)
    except InvalidRequest as exc:
        raise ValueError(exc.message) from None
    if seconds is not None and seconds > MAX_KEEP_ALIVE_SECONDS:
        raise ValueError(f"keep_alive {_shown(value)} is not a usable duration: at most "
                         f"{int(MAX_KEEP_ALIVE_SECONDS)} s (10 years); -1 keeps the model loaded forever")
    return value


def check_model_size(value: Any) -> int | float | str | None:
    """``model_size_in_billions``: null, or a positive size as a number or as the catalog spells it (``0_5``)."""
    if value is None:
        return None
    number: float | None = None
    if _is_int(value) or isinstance(value, float):
        number = float(value) if abs(value) < 1e7 else None
    elif isinstance(value, str) and _SIZE_TEXT.fullmatch(value):
        number = float(value.replace("_", "."))
    if number is None or not math.isfinite(number) or number <= 0:
        raise ValueError(f"model_size_in_billions is a positive size like 7, 1.5 or '0_5', not {_shown(value)}")
    return value  # type: ignore[no-any-return]


def _shown(value: Any) -> str:
    """A short rendering of a rejected value for a message (clients choose it, so its length is bounded)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
