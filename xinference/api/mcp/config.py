"""The operator's MCP configuration: the common ``{"mcpServers": {name: {...}}}`` JSON file.

Each entry is either a stdio server (``command``, optional ``args`` and ``env``), started and supervised by the
platform, or a remote one (``url``, optional ``headers``) reached with streamable HTTP. One more top-level key is
ours: ``"allowRuntimeCommands": true`` lets ``POST /v1/mcp/servers`` add stdio servers too (by default only URL
servers may be added at runtime: a request could otherwise make the server run any command).

Every mistake is an :class:`~xinference.errors.InvalidRequest` whose message and ``param`` name the bad entry
(``mcpServers.search.args``), so the same checks serve the file at start-up and the admin route's body.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

from xinference.errors import InvalidRequest

__all__ = [
    "HttpServerConfig",
    "McpConfig",
    "ServerConfig",
    "StdioServerConfig",
    "check_server_name",
    "load_config",
    "parse_config",
    "parse_server",
]

#: A server name: also the prefix of its tools' names when they clash (``name__tool``), so it follows tool names.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
_HTTP_KEYS = frozenset({"url", "headers"})
#: keys other clients write in the same file (Claude Desktop, Cursor, VS Code) that change nothing here
_IGNORED_KEYS = frozenset({"type", "transport", "disabled", "description", "autoApprove", "alwaysAllow", "timeout"})


@dataclass(frozen=True)
class StdioServerConfig:
    """A server the platform runs as a child process and talks to over its stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    @property
    def transport(self) -> str:
        return "stdio"


@dataclass(frozen=True)
class HttpServerConfig:
    """A server reached at ``url`` with the streamable HTTP transport, sending ``headers`` with every request."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "http"


ServerConfig = Union[StdioServerConfig, HttpServerConfig]


@dataclass(frozen=True)
class McpConfig:
    """The parsed file: servers by name, and whether stdio servers may be added at runtime."""

    servers: dict[str, ServerConfig] = field(default_factory=dict)
    allow_runtime_commands: bool = False


def check_server_name(name: object, param: str) -> str:
    """A server name: 1-64 letters, digits, ``_`` or ``-`` (it prefixes tool names)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest(
            f"invalid MCP server name {str(name)[:80]!r}: use 1-64 letters, digits, '_' or '-'", param=param
        )
    return name


def load_config(path: Path) -> McpConfig:
    """Read and check the file at ``path``; a missing file or bad JSON is an InvalidRequest naming the path."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRequest(f"cannot read the MCP config {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"the MCP config {path} is not JSON: {exc}") from None
    return parse_config(data, source=str(path))


def parse_config(data: object, source: str = "the MCP config") -> McpConfig:
    """Check a decoded config object."""
    if not isinstance(data, dict):
        raise InvalidRequest(f'{source} must be an object like {{"mcpServers": {{...}}}}')
    unknown = sorted(set(data) - {"mcpServers", "allowRuntimeCommands"})
    if unknown:
        raise InvalidRequest(
            f"{source}: unknown key {unknown[0]!r}; the keys are 'mcpServers' and 'allowRuntimeCommands'",
            param=unknown[0],
        )
    raw = data.get("mcpServers", {})
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{source}: 'mcpServers' must be an object mapping names to servers", param="mcpServers")
    allow = data.get("allowRuntimeCommands", False)
    if not isinstance(allow, bool):
        raise InvalidRequest(f"{source}: 'allowRuntimeCommands' must be true or false", param="allowRuntimeCommands")
    servers: dict[str, ServerConfig] = {}
    for name, entry in raw.items():
        param = f"mcpServers.{name}"
        check_server_name(name, param)
        try:
            servers[name] = parse_server(entry, param)
        except InvalidRequest as exc:
            raise InvalidRequest(f"{source}: {exc.message}", param=exc.param) from None
    return McpConfig(servers, allow)


def parse_server(entry: object, param: str) -> ServerConfig:
    """One server's entry; ``param`` names it in errors (``mcpServers.search``)."""
    if not isinstance(entry, dict):
        raise InvalidRequest(f"{param} must be an object with 'command' or 'url'", param=param)
    keys = set(entry) - _IGNORED_KEYS
    has_command, has_url = "command" in keys, "url" in keys
    if has_command == has_url:
        raise InvalidRequest(
            f"{param} needs exactly one of 'command' (a stdio server) or 'url' (an HTTP server)", param=param
        )
    allowed = _STDIO_KEYS if has_command else _HTTP_KEYS
    extra = sorted(keys - allowed)
    if extra:
        raise InvalidRequest(
            f"{param}: unknown key {extra[0]!r} for a {'stdio' if has_command else 'URL'} server; "
            f"the keys are {', '.join(sorted(allowed))}",
            param=f"{param}.{extra[0]}",
        )
    if has_command:
        return _stdio(entry, param)
    return _http(entry, param)


def _stdio(entry: dict[str, Any], param: str) -> StdioServerConfig:
    command = entry["command"]
    if not isinstance(command, str) or not command.strip() or "\0" in command:
        raise InvalidRequest(f"{param}.command must be a non-empty string", param=f"{param}.command")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
        raise InvalidRequest(f"{param}.args must be a list of strings", param=f"{param}.args")
    env = _strings(entry.get("env", {}), f"{param}.env")
    cwd = entry.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise InvalidRequest(f"{param}.cwd must be a folder path", param=f"{param}.cwd")
    return StdioServerConfig(command, tuple(args), env, cwd)


def _http(entry: dict[str, Any], param: str) -> HttpServerConfig:
    url = entry["url"]
    if not isinstance(url, str) or not _is_http_url(url):
        raise InvalidRequest(f"{param}.url must be an http:// or https:// URL", param=f"{param}.url")
    return HttpServerConfig(url, _strings(entry.get("headers", {}), f"{param}.headers"))


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _strings(value: object, param: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidRequest(f"{param} must be an object of string values", param=param)
    return dict(value)
