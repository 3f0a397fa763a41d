"""The Responses API's ``mcp`` tool, as OpenAI defines it: the request's shape, its servers, its output items.

A tool ``{"type": "mcp", "server_label", "server_url", "headers", "allowed_tools", "require_approval",
"server_description"}`` names one MCP server. With ``server_url`` the platform connects to that URL for this request
only, when the operator allowed it (``XINFERENCE_MCP_ALLOWED_URLS``); without it, ``server_label`` names a server of
the operator's MCP config. ``allowed_tools`` (a list of names, or ``{"tool_names", "read_only"}``) filters the tools
offered; ``require_approval`` (``"always"``, the default as at OpenAI, ``"never"``, or ``{"always": {...},
"never": {...}}`` filters) decides which calls wait for the client's ``mcp_approval_response``.

Output items: ``mcp_list_tools`` (once per server in a conversation), ``mcp_call`` (``output``, or ``error`` with
``status: "failed"``), ``mcp_approval_request``. The same items are accepted as input, with
``mcp_approval_response``. Their streaming events are made by :class:`McpItems` for
:class:`~xinference.api.openai.responses.stream.ResponseStream`.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from xinference.api.mcp.config import check_server_name
from xinference.api.mcp.manager import McpHub
from xinference.api.openai.chat.hosted_mcp import HostedServer, HostedTools, ResumedCall
from xinference.errors import InvalidRequest, McpError, McpServerNotFound, UnsupportedOption

__all__ = ["McpItems", "McpToolSpec", "ResponsesMcp", "open_tools", "parse_mcp_tool"]

Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class _Filter:
    """``{"tool_names": [...], "read_only": bool}``: matches a tool by name, or by its read-only hint."""

    names: frozenset[str] | None = None
    read_only: bool | None = None

    def matches(self, name: str, read_only: bool) -> bool:
        if self.names is not None and name in self.names:
            return True
        return self.read_only is not None and read_only == self.read_only

    @classmethod
    def parse(cls, raw: object, at: str) -> _Filter:
        if isinstance(raw, list):
            return cls(frozenset(_names(raw, at)))
        if not isinstance(raw, dict):
            raise InvalidRequest("a tool filter is a list of tool names or {'tool_names', 'read_only'}", param=at)
        unknown = sorted(set(raw) - {"tool_names", "read_only"})
        if unknown:
            raise InvalidRequest(f"unknown key {unknown[0]!r} in a tool filter", param=f"{at}.{unknown[0]}")
        names = raw.get("tool_names")
        read_only = raw.get("read_only")
        if read_only is not None and not isinstance(read_only, bool):
            raise InvalidRequest("read_only must be true or false", param=f"{at}.read_only")
        return cls(frozenset(_names(names, f"{at}.tool_names")) if names is not None else None, read_only)


def _names(raw: object, at: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        raise InvalidRequest("tool names must be a list of strings", param=at)
    return list(raw)


@dataclass(frozen=True)
class McpToolSpec:
    """One ``mcp`` tool of a request, checked; ``at`` is where it is (``tools[2]``)."""

    at: str
    label: str
    url: str | None
    headers: dict[str, str]
    allowed: _Filter | None
    approval: str | tuple[_Filter | None, _Filter | None]

    def needs_approval(self, name: str, read_only: bool) -> bool:
        if not isinstance(self.approval, tuple):
            return self.approval == "always"
        always, never = self.approval
        if always is not None and always.matches(name, read_only):
            return True
        if never is not None and never.matches(name, read_only):
            return False
        return True  # OpenAI's default for a tool no filter names


_KEYS = frozenset(
    {"type", "server_label", "server_url", "headers", "allowed_tools", "require_approval", "server_description"}
)


def parse_mcp_tool(tool: dict[str, Any], at: str) -> McpToolSpec:
    """Check one ``{"type": "mcp", ...}`` tool (400 naming the field)."""
    for hosted in ("connector_id", "tunnel_id", "authorization", "defer_loading", "allowed_callers"):
        if tool.get(hosted) is not None:
            raise UnsupportedOption(
                f"{hosted} is not supported: name a server by server_url, or by the server_label of one the "
                "operator configured",
                param=f"{at}.{hosted}",
            )
    unknown = sorted(set(tool) - _KEYS - {"connector_id", "tunnel_id", "authorization", "defer_loading"})
    if unknown:
        raise InvalidRequest(f"unknown field {unknown[0]!r} of an mcp tool", param=f"{at}.{unknown[0]}")
    label = check_server_name(tool.get("server_label"), f"{at}.server_label")
    url = tool.get("server_url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise InvalidRequest("server_url must be an http:// or https:// URL", param=f"{at}.server_url")
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidRequest("headers must be an object of string values", param=f"{at}.headers")
    if headers and url is None:
        raise InvalidRequest("headers go with a server_url", param=f"{at}.headers")
    allowed = tool.get("allowed_tools")
    allowed_filter = _Filter.parse(allowed, f"{at}.allowed_tools") if allowed is not None else None
    return McpToolSpec(at, label, url, dict(headers), allowed_filter, _approval(tool.get("require_approval"), at))


def _approval(raw: object, at: str) -> str | tuple[_Filter | None, _Filter | None]:
    where = f"{at}.require_approval"
    if raw is None or raw == "always":
        return "always"
    if raw == "never":
        return "never"
    if not isinstance(raw, dict) or not raw or set(raw) - {"always", "never"}:
        raise InvalidRequest("require_approval is 'always', 'never' or {'always': {...}, 'never': {...}}", param=where)
    always, never = raw.get("always"), raw.get("never")
    return (
        _Filter.parse(always, f"{where}.always") if always is not None else None,
        _Filter.parse(never, f"{where}.never") if never is not None else None,
    )


@dataclass
class ResponsesMcp:
    """What a request's ``mcp`` tools and MCP input items add to its translation."""

    specs: list[McpToolSpec] = field(default_factory=list)
    #: labels whose tools the conversation listed already (an ``mcp_list_tools`` item in it)
    listed: set[str] = field(default_factory=set)
    #: the ``mcp_approval_response`` items of the input
    resume: list[ResumedCall] = field(default_factory=list)
    #: ``{"type": "mcp", "server_label", "name"}``
    choice: dict[str, Any] | None = None

    def __bool__(self) -> bool:
        return bool(self.specs or self.resume)

    def check(self) -> None:
        labels = [spec.label for spec in self.specs]
        seen: set[str] = set()
        for spec in self.specs:
            if spec.label in seen:
                raise InvalidRequest(f"server_label {spec.label!r} is used twice", param=f"{spec.at}.server_label")
            seen.add(spec.label)
        if self.choice is not None and self.choice.get("server_label") not in labels:
            raise InvalidRequest(
                f"tool_choice names MCP server {str(self.choice.get('server_label'))[:80]!r}, which is not in 'tools'",
                param="tool_choice.server_label",
            )
        if self.resume and not self.specs:
            raise InvalidRequest(
                "an mcp_approval_response needs the mcp tool of its server in 'tools' again", param="tools"
            )


async def open_tools(hub: McpHub, mcp: ResponsesMcp, client_tools: list[dict[str, Any]] | None) -> HostedTools:
    """Connect to (or find) every server the request names and list its tools; refusals are 4xx naming the tool.
    Sessions opened here are closed by ``HostedTools.aclose``."""
    servers: list[HostedServer] = []
    sessions: list[Any] = []
    try:
        for spec in mcp.specs:
            if spec.url is not None:
                session = await hub.open_url(spec.url, spec.headers, param=f"{spec.at}.server_url")
                sessions.append(session)
                caller: Any = session
                infos = await session.list_tools()
            else:
                try:
                    infos = await hub.list_tools(spec.label)
                except (McpError, McpServerNotFound) as exc:
                    raise _not_configured(spec, exc) from None
                caller = _Configured(hub, spec.label)
            read_only = {info.name: _read_only(info) for info in infos}
            offered = [i for i in infos if spec.allowed is None or spec.allowed.matches(i.name, read_only[i.name])]
            servers.append(
                HostedServer(
                    spec.label,
                    caller,
                    offered,
                    _approval_of(spec, read_only),
                    listed=spec.label in mcp.listed,
                )
            )
    except BaseException:
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.aclose()
        raise
    return HostedTools.build(servers, client_tools, sessions)


def _approval_of(spec: McpToolSpec, read_only: dict[str, bool]) -> Callable[[str], bool]:
    return lambda name: spec.needs_approval(name, read_only.get(name, False))


def _read_only(info: Any) -> bool:
    annotations = getattr(info, "annotations", None) or {}
    return bool(annotations.get("readOnlyHint") or annotations.get("read_only_hint"))


def _not_configured(spec: McpToolSpec, exc: McpError | McpServerNotFound) -> InvalidRequest:
    message = exc.message
    return InvalidRequest(
        f"MCP server {spec.label!r}: {message}; give a server_url, or the server_label of a configured server",
        param=f"{spec.at}.server_label",
    )


@dataclass(frozen=True)
class _Configured:
    hub: McpHub
    label: str

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> Any:
        return await self.hub.call_tool(self.label, name, arguments, timeout)


# -- input items ------------------------------------------------------------------------------------------------------
def input_item(
    mcp: ResponsesMcp, assistant: Callable[[], dict[str, Any]], item: dict[str, Any], at: str
) -> list[dict[str, Any]]:
    """One MCP input item: what it adds to the chat messages (an ``mcp_call`` is a tool call and its result; an
    ``mcp_approval_request`` a call held for approval), or what it tells the run (listed servers, approvals)."""
    kind = item["type"]
    if kind == "mcp_list_tools":
        label = item.get("server_label")
        if isinstance(label, str):
            mcp.listed.add(label)
        return []
    if kind == "mcp_approval_response":
        request_id, approve = item.get("approval_request_id"), item.get("approve")
        if not isinstance(request_id, str) or not request_id:
            raise InvalidRequest(
                "an mcp_approval_response needs its approval_request_id", param=f"{at}.approval_request_id"
            )
        if not isinstance(approve, bool):
            raise InvalidRequest("approve must be true or false", param=f"{at}.approve")
        reason = item.get("reason")
        mcp.resume.append(ResumedCall(request_id, approve, reason if isinstance(reason, str) else None))
        return []
    name, arguments = item.get("name"), item.get("arguments")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"an {kind} item needs the tool's name", param=f"{at}.name")
    if not isinstance(arguments, str):
        raise InvalidRequest(f"an {kind} item's arguments must be a JSON string", param=f"{at}.arguments")
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    call: dict[str, Any] = {"id": call_id or f"call_{uuid.uuid4().hex[:24]}", "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    assistant().setdefault("tool_calls", []).append(call)
    if kind == "mcp_approval_request":
        return []
    output = item.get("output")
    error = item.get("error")
    content = output if isinstance(output, str) else f"Error: {_error_text(error)}"
    return [{"role": "tool", "tool_call_id": call["id"], "content": content}]


def _error_text(error: object) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        if isinstance(error.get("message"), str):
            return str(error["message"])
        return json.dumps(error.get("content", error), ensure_ascii=False)
    return "the call failed"


# -- output items and their events ------------------------------------------------------------------------------------
def list_tools_item(item_id: str, listed: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "mcp_list_tools",
        "server_label": listed["server_label"],
        "tools": listed["tools"],
        "error": None,
    }


def call_item(item_id: str, record: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] | None = None
    if record.get("error") is not None:
        if record.get("error_kind") == "tool":
            error = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": record["error"]}]}
        else:
            error = {"type": "mcp_protocol_error", "code": -32603, "message": record["error"]}
    return {
        "id": item_id,
        "type": "mcp_call",
        "server_label": record.get("server"),
        "name": record["name"],
        "arguments": record["arguments"],
        "output": record.get("output"),
        "error": error,
        "status": record["status"],
        "approval_request_id": record.get("approval_request_id"),
    }


def approval_item(request: dict[str, Any]) -> dict[str, Any]:
    return {"type": "mcp_approval_request", **request}


class McpItems:
    """The MCP part of a Responses stream: turns the run's ``mcp_list_tools``, ``mcp_call`` and
    ``mcp_approval_request`` chunks into output items and their events. ``add`` (which closes the item being
    streamed and announces the new one) and ``event`` are the stream's own; the items are appended to ``output``
    here."""

    def __init__(self, add: Callable[[dict[str, Any]], list[Event]], event: Callable[..., Event]) -> None:
        self._add = add
        self._event = event
        self._calls: dict[str, dict[str, Any]] = {}  # call id -> its open item

    def feed(self, chunk: dict[str, Any], output: list[dict[str, Any]], new_id: Callable[[str], str]) -> list[Event]:
        if "mcp_list_tools" in chunk:
            item = list_tools_item(new_id("mcpl"), chunk["mcp_list_tools"])
            events = self._add({**item, "tools": []})
            index = len(output)
            events.append(self._event("response.mcp_list_tools.in_progress", item_id=item["id"], output_index=index))
            events.append(self._event("response.mcp_list_tools.completed", item_id=item["id"], output_index=index))
            output.append(item)
            events.append(self._event("response.output_item.done", output_index=index, item=item))
            return events
        if "mcp_approval_request" in chunk:
            item = approval_item(chunk["mcp_approval_request"])
            events = self._add(item)
            output.append(item)
            events.append(self._event("response.output_item.done", output_index=len(output) - 1, item=item))
            return events
        record = chunk["mcp_call"]
        if record["status"] == "in_progress":
            item = call_item(new_id("mcp"), record)
            events = self._add({**item, "arguments": ""})
            index = len(output)
            self._calls[record["id"]] = {"id": item["id"], "index": index}
            where = {"item_id": item["id"], "output_index": index}
            events.append(self._event("response.mcp_call.in_progress", **where))
            events.append(self._event("response.mcp_call_arguments.delta", **where, delta=record["arguments"]))
            events.append(self._event("response.mcp_call_arguments.done", **where, arguments=record["arguments"]))
            output.append(item)
            return events
        opened = self._calls.pop(record["id"])
        item = call_item(opened["id"], record)
        output[opened["index"]] = item
        where = {"item_id": item["id"], "output_index": opened["index"]}
        name = "response.mcp_call.completed" if record["status"] == "completed" else "response.mcp_call.failed"
        return [
            self._event(name, **where),
            self._event("response.output_item.done", output_index=opened["index"], item=item),
        ]
