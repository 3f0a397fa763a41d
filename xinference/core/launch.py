"""The fields of a launch, defined once: the supervisor's :class:`LaunchRequest`, the API's
``LaunchModelRequest.to_launch`` and ``xinference launch`` all read them from here.

Also here: :class:`LaunchPlan` (what one replica's process needs, built by the supervisor), and what a launch's
operations fields mean (keep-alive durations, the slots an engine config gives a replica), which the supervisor, the
API's gateway and the CLI all read.

A launch request is its platform fields (below) plus ``engine_kwargs``, the engine's own options. Fields marked
``cli_option`` are set by ``xinference launch``'s own options, so the CLI refuses them as ``--name value`` engine
options; the others ride along that way (``--keep_alive 10m``). Kept free of actors and engines, so the API
protocol and the CLI can import it.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from xinference.errors import InvalidRequest

__all__ = [
    "CLI_OPTION_FIELDS",
    "DEFAULT_SLOTS",
    "FOREVER",
    "LAUNCH_FIELDS",
    "MAX_GPUS",
    "MAX_KEEP_ALIVE_SECONDS",
    "LaunchPlan",
    "LaunchRequest",
    "check_gpu_idx",
    "check_keep_alive",
    "check_model_size",
    "check_n_gpu",
    "describe_keep_alive",
    "parse_keep_alive",
    "slots_of",
]

_CLI = {"cli_option": True}


@dataclass
class LaunchRequest:
    """A validated launch, as the API hands it over (see ``api/admin/models/protocol.py``)."""

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
    # -- operations: how long it stays loaded idle, how many requests may queue, whether it returns after a restart
    keep_alive: Any = None
    max_queued: int | None = None
    queue_timeout: float | None = None
    autostart: bool = False
    # -- MCP: the configured MCP servers (names, or "*") whose tools chat requests that send no tools of their own
    # get (doc/mcp.md); kept with the model, read by the API
    mcp_servers: list[str] | str | None = None


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
    raise ValueError(f"n_gpu is 'auto', null (CPU only) or a number of GPUs from 0 to {MAX_GPUS}, not {_shown(value)}")


def check_gpu_idx(value: Any) -> int | list[int] | None:
    """``gpu_idx``: null, a GPU index, or a non-empty list of distinct GPU indices (0 to ``MAX_GPUS - 1``)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_GPUS or not all(_is_int(i) and 0 <= i < MAX_GPUS for i in items):
        raise ValueError(
            f"gpu_idx is a GPU index or a non-empty list of GPU indices (0 to {MAX_GPUS - 1}), not {_shown(value)}"
        )
    if len(set(items)) != len(items):
        raise ValueError(f"gpu_idx lists a GPU twice: {items}")
    return value  # type: ignore[no-any-return]


def check_keep_alive(value: Any) -> str | int | float | None:
    """``keep_alive``: null (the server's default), a duration like ``"10m"``, a number of seconds, or a negative
    number (forever); finite and at most :data:`MAX_KEEP_ALIVE_SECONDS`."""
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(
            f"keep_alive is a duration like '10m', a number of seconds, or -1 (forever), not {_shown(value)}"
        )
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
        raise ValueError(
            f"keep_alive {_shown(value)} is not a usable duration: at most "
            f"{int(MAX_KEEP_ALIVE_SECONDS)} s (10 years); -1 keeps the model loaded forever"
        )
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


@dataclass
class LaunchPlan:
    """Everything a model subprocess needs to load one replica; built by the supervisor.

    It crosses processes as it is (xoscar pickles it: supervisor → worker → model process), so every field is
    plain data (str, lists, dicts of JSON values) that any Python running xinference can unpickle, an engine
    environment's included. :meth:`to_dict` / :meth:`from_dict` are for where it is stored as JSON (the worker's
    saved replicas) and for reports the supervisor still reads as dicts."""

    model_uid: str
    replica_uid: str
    model_engine: str
    family: dict[str, Any]
    spec: dict[str, Any]
    quantization: str
    engine_config: dict[str, Any]
    hardware: dict[str, Any] = field(default_factory=dict)
    #: Local weights given at launch (override the spec's sources) and the hub chosen at launch, if any.
    model_path: str | None = None
    download_hub: str | None = None
    #: GPUs of the worker this replica may use (the worker sets the device visibility of the subprocess).
    gpu_indices: list[int] = field(default_factory=list)
    #: the draft model of speculative decoding, planned at launch (``model/draft.py``); None: no draft
    draft: dict[str, Any] | None = None
    #: the multimodal projector of a GGUF vision model, planned at launch (``model/projector.py``): a file name of
    #: the spec's ``multimodal_projectors`` or an absolute path on the worker; None: none
    projector: str | None = None
    #: the launch this replica belongs to and the supervisor incarnation that placed it: what the supervisor judges a
    #: reported replica by (``core/supervisor/membership.py``); empty in plans saved before they existed
    launch_id: str = ""
    incarnation: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (nested dicts and lists copied too)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchPlan:
        """The plan :meth:`to_dict` gave. Fields added since it was saved take their defaults; keys this version
        does not know (a file written by a newer one) are left out; a missing required field is a TypeError."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


# -- keep-alive and slots: what a launch's operations fields mean ------------------------------------------
#: What :func:`parse_keep_alive` returns for "never unload".
FOREVER: float | None = None
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_keep_alive(value: Any, param: str = "keep_alive") -> float | None:
    """Seconds a model stays loaded after its last request; None (``FOREVER``) for a negative value.

    Raises InvalidRequest naming ``param`` for anything else than a number or a duration like ``"10m"``.
    """
    if isinstance(value, bool) or value is None:
        raise InvalidRequest(
            f"{param} must be a duration like '10m', a number of seconds, or -1 (forever)", param=param
        )
    if isinstance(value, (int, float)):
        if value < 0:
            return FOREVER
        return _bounded(value, value, param)
    text = str(value).strip().lower()
    negative = text.startswith("-")
    body = text[1:] if negative else text
    try:
        seconds = float(body)
    except ValueError:
        pieces = _DURATION.findall(body)
        if not body or "".join(n + u for n, u in pieces) != body:
            raise InvalidRequest(
                f"{param} {str(value)[:40]!r} is not a duration: use e.g. '30s', '10m', '1h30m', a number of "
                "seconds, 0 (unload after the current requests) or -1 (forever)",
                param=param,
            ) from None
        seconds = sum(float(n) * _UNITS[u] for n, u in pieces)
    return FOREVER if negative else _bounded(seconds, value, param)


#: The longest finite keep-alive (about 10 years): a longer one is a typo, and -1 says "forever".
MAX_KEEP_ALIVE_SECONDS = 10 * 365 * 86400.0


def _bounded(seconds: float, given: Any, param: str) -> float:
    """``seconds`` as a float, or InvalidRequest for nan, infinity or more than ten years (a float too large for
    the clock would fail later, far from the request that set it)."""
    try:
        number = float(seconds)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number > MAX_KEEP_ALIVE_SECONDS:
        raise InvalidRequest(
            f"{param} {str(given)[:40]!r} is out of range: at most ten years, or -1 (forever)", param=param
        )
    return number


def describe_keep_alive(seconds: float | None) -> str:
    """How ``GET /v1/models`` shows a keep-alive: ``"forever"``, ``"0s"``, ``"10m"``, ``"90s"``."""
    if seconds is None:
        return "forever"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


#: Slots assumed for an engine that states none (a managed server left at its own default).
DEFAULT_SLOTS = 8
#: Engine options that say how many requests one replica serves at once, in the order they are looked for.
_SLOT_KEYS = ("n_parallel", "max_num_seqs", "max_running_requests", "max_batch_size")


def slots_of(engine_config: dict[str, Any]) -> int:
    """Requests one replica serves at once, from its resolved engine options (``DEFAULT_SLOTS`` when unstated)."""
    for key in _SLOT_KEYS:
        value = engine_config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_SLOTS
