"""Anthropic's MCP connector on the Messages API: ``mcp_servers`` in a request, ``mcp_tool_use`` /
``mcp_tool_result`` blocks in the answer.

A request lists servers as ``{"type": "url", "url", "name", "authorization_token", "tool_configuration":
{"enabled", "allowed_tools"}}``. The platform connects to each URL for this request only, when the operator allowed
it (``XINFERENCE_MCP_ALLOWED_URLS``); the token is sent as ``Authorization: Bearer``. Their tools are offered to
the model beside the request's own ``tools``; each call the model makes to one is executed by the platform and
appears in the answer as an ``mcp_tool_use`` block (``id``, ``name``, ``server_name``, ``input``) followed by its
``mcp_tool_result`` (``tool_use_id``, ``is_error``, ``content``), before the text that used it. A later request may
send those blocks back in an assistant turn; they become the tool call and its result in the conversation.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xinference.api.mcp.config import check_server_name
from xinference.api.mcp.manager import McpHub
from xinference.api.openai.chat.hosted_mcp import HostedServer, HostedTools
from xinference.api.openai.chat.translated import Event
from xinference.errors import InvalidRequest

if TYPE_CHECKING:
    from xinference.api.anthropic.stream import MessageStream

__all__ = ["McpBlocks", "McpServerSpec", "MessageBuilder", "open_servers", "parse_mcp_servers"]


@dataclass(frozen=True)
class McpServerSpec:
    """One entry of ``mcp_servers``, checked; ``at`` is where it is (``mcp_servers[0]``)."""

    at: str
    name: str
    url: str
    token: str | None
    enabled: bool
    allowed: frozenset[str] | None


def parse_mcp_servers(raw: list[dict[str, Any]] | None) -> list[McpServerSpec]:
    """Check ``mcp_servers`` (a 400 naming the field)."""
    specs: list[McpServerSpec] = []
    for n, entry in enumerate(raw or []):
        at = f"mcp_servers[{n}]"
        if not isinstance(entry, dict):
            raise InvalidRequest("an MCP server is an object with type, url and name", param=at)
        if entry.get("type") != "url":
            raise InvalidRequest("an MCP server's type must be 'url'", param=f"{at}.type")
        unknown = sorted(set(entry) - {"type", "url", "name", "authorization_token", "tool_configuration"})
        if unknown:
            raise InvalidRequest(f"unknown field {unknown[0]!r} of an MCP server", param=f"{at}.{unknown[0]}")
        name = check_server_name(entry.get("name"), f"{at}.name")
        if any(spec.name == name for spec in specs):
            raise InvalidRequest(f"MCP server name {name!r} is used twice", param=f"{at}.name")
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequest("url must be an http:// or https:// URL", param=f"{at}.url")
        token = entry.get("authorization_token")
        if token is not None and not isinstance(token, str):
            raise InvalidRequest("authorization_token must be a string", param=f"{at}.authorization_token")
        config = entry.get("tool_configuration") or {}
        if not isinstance(config, dict) or set(config) - {"enabled", "allowed_tools"}:
            raise InvalidRequest("tool_configuration is {'enabled', 'allowed_tools'}", param=f"{at}.tool_configuration")
        enabled = config.get("enabled", True)
        if not isinstance(enabled, bool):
            raise InvalidRequest("enabled must be true or false", param=f"{at}.tool_configuration.enabled")
        allowed = config.get("allowed_tools")
        if allowed is not None and (not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed)):
            raise InvalidRequest(
                "allowed_tools must be a list of tool names", param=f"{at}.tool_configuration.allowed_tools"
            )
        specs.append(McpServerSpec(at, name, url, token, enabled, frozenset(allowed) if allowed is not None else None))
    return specs


async def open_servers(
    hub: McpHub, specs: list[McpServerSpec], client_tools: list[dict[str, Any]] | None
) -> HostedTools:
    """Connect to every enabled server and list its tools (closed by ``HostedTools.aclose``)."""
    servers: list[HostedServer] = []
    sessions: list[Any] = []
    try:
        for spec in specs:
            if not spec.enabled:
                continue
            headers = {"Authorization": f"Bearer {spec.token}"} if spec.token else None
            session = await hub.open_url(spec.url, headers, param=f"{spec.at}.url")
            sessions.append(session)
            infos = await session.list_tools()
            offered = [info for info in infos if spec.allowed is None or info.name in spec.allowed]
            servers.append(HostedServer(spec.name, session, offered, listed=True))
    except BaseException:
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.aclose()
        raise
    return HostedTools.build(servers, client_tools, sessions)


class McpBlocks:
    """The MCP part of a Messages stream: each executed call (the run's ``mcp_call`` chunks) as an
    ``mcp_tool_use`` block when it starts and an ``mcp_tool_result`` block when it ends."""

    def __init__(self, stream: MessageStream) -> None:
        self._stream = stream  # its _open, _close and _delta frame the blocks
        self._ids: dict[str, str] = {}

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        record = chunk.get("mcp_call")
        if record is None:
            return []  # a server's tool list has no block in this API
        stream = self._stream
        if record["status"] == "in_progress":
            block_id = f"mcptoolu_{uuid.uuid4().hex[:24]}"
            self._ids[record["id"]] = block_id
            block = {
                "type": "mcp_tool_use",
                "id": block_id,
                "name": record["name"],
                "server_name": record["server"],
                "input": {},
            }
            events: list[Event] = stream._open(block)
            events.append(stream._delta({"type": "input_json_delta", "partial_json": record["arguments"]}))
            return events + stream._close()
        failed = record["status"] != "completed"
        text = (record["error"] if failed else record["output"]) or ""
        result = {
            "type": "mcp_tool_result",
            "tool_use_id": self._ids.pop(record["id"], record["id"]),
            "is_error": failed,
            "content": [{"type": "text", "text": text}],
        }
        return stream._open(result) + stream._close()


class MessageBuilder:
    """A whole ``message`` gathered from a Messages stream's events (a non-streamed request with MCP servers runs
    its turns as streams, so both forms carry the same blocks)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self._json: dict[int, str] = {}

    def apply(self, events: list[Event]) -> None:
        for name, payload in events:
            if name == "message_start":
                self.message = dict(payload["message"])
                self.message["content"] = []
            elif name == "content_block_start":
                self.message["content"].append(dict(payload["content_block"]))
            elif name == "content_block_delta":
                self._delta(payload["index"], payload["delta"])
            elif name == "content_block_stop":
                index = payload["index"]
                if index in self._json:
                    text = self._json.pop(index)
                    try:
                        value = json.loads(text) if text.strip() else {}
                    except json.JSONDecodeError:
                        value = {}  # a call cut by max_tokens (stop_reason says so)
                    self.message["content"][index]["input"] = value if isinstance(value, dict) else {}
            elif name == "message_delta":
                self.message.update(payload["delta"])
                self.message["usage"] = payload["usage"]

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.message["content"][index]
        if delta["type"] == "text_delta":
            block["text"] += delta["text"]
        elif delta["type"] == "thinking_delta":
            block["thinking"] += delta["thinking"]
        elif delta["type"] == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta["partial_json"]
