"""Which MCP tools a chat completion offers its model, and the tool loop around its turns.

A request names configured servers with ``mcp_servers`` (a list, or ``"*"`` for all); a request that names none and
sends no ``tools`` of its own gets the servers its model was launched with (the ``mcp_servers`` launch option). A
server a request names explicitly must be there and ready (404 / 502 otherwise); with ``"*"`` or the launch's list,
a server that is down is left out and logged, so one broken tool server does not stop every chat.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from xinference.api.mcp.loop import (
    DEFAULT_MAX_TOOL_ROUNDS,
    HubServer,
    ToolCaller,
    ToolSet,
    run_tool_loop,
    stream_tool_loop,
)
from xinference.api.mcp.manager import McpHub, ToolInfo
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.errors import McpError, McpServerNotFound

if TYPE_CHECKING:
    from xinference.api.openai.chat.serving import GenerationService

__all__ = ["complete_with_tools", "request_tools", "stream_with_tools"]

logger = logging.getLogger(__name__)


async def request_tools(
    hub: McpHub | None, body: ChatCompletionRequest, params: dict[str, Any], launch_servers: Any
) -> ToolSet | None:
    """The MCP tools of this request (None: it uses none); ``launch_servers`` is the model's launch option."""
    names: list[str]
    if body.mcp_servers is not None:
        strict = body.mcp_servers != "*"
        names = list(body.mcp_servers) if strict else (hub.names() if hub else [])
    elif launch_servers and not params.get("tools"):
        strict = False
        names = (hub.names() if hub else []) if launch_servers == "*" else list(launch_servers)
    else:
        return None
    if hub is None:
        if strict and names:
            raise McpServerNotFound("no MCP servers are configured on this server", param="mcp_servers")
        return None
    servers: list[tuple[str, ToolCaller, list[ToolInfo]]] = []
    for name in dict.fromkeys(names):
        try:
            infos = await hub.list_tools(name)
        except (McpError, McpServerNotFound) as exc:
            if strict:
                raise
            logger.warning("MCP server %s left out of a chat request: %s", name, exc.message)
            continue
        servers.append((name, HubServer(hub, name), infos))
    tools = ToolSet.build(servers, params.get("tools"))
    return tools if tools else None


def _turn_params(params: dict[str, Any], tools: ToolSet) -> Callable[[list[dict[str, Any]], Any], dict[str, Any]]:
    """The engine parameters of one turn: the request's, its messages so far, the client's tools and the MCP ones,
    and the turn's tool_choice (the loop decides it)."""
    base = {**params, "tools": [*(params.get("tools") or []), *tools.chat_tools()]}
    base.pop("tool_choice", None)

    def turn(messages: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any]:
        out = {**base, "messages": messages}
        if tool_choice is not None:
            out["tool_choice"] = tool_choice
        return out

    return turn


async def complete_with_tools(
    service: GenerationService, body: ChatCompletionRequest, params: dict[str, Any], tools: ToolSet
) -> dict[str, Any]:
    """The whole response, with ``mcp_calls``."""
    make = _turn_params(params, tools)

    async def turn(messages: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any]:
        return await service.complete("chat", body.model, make(messages, tool_choice), body.keep_alive)

    rounds = body.max_tool_rounds or DEFAULT_MAX_TOOL_ROUNDS
    return await run_tool_loop(turn, params["messages"], tools, params.get("tool_choice"), rounds)


async def stream_with_tools(
    service: GenerationService, body: ChatCompletionRequest, params: dict[str, Any], tools: ToolSet
) -> AsyncIterator[list[dict[str, Any]]]:
    """The stream's chunk batches, its first turn already opened (an error there is still a proper status)."""
    make = _turn_params(params, tools)

    async def open_turn(messages: list[dict[str, Any]], tool_choice: Any) -> AsyncIterator[list[dict[str, Any]]]:
        return await service.open("chat", body.model, make(messages, tool_choice), body.keep_alive)

    rounds = body.max_tool_rounds or DEFAULT_MAX_TOOL_ROUNDS
    return await _primed(stream_tool_loop(open_turn, params["messages"], tools, params.get("tool_choice"), rounds))


async def _primed(batches: AsyncIterator[list[dict[str, Any]]]) -> AsyncIterator[list[dict[str, Any]]]:
    """Read the first batch now (the first turn opens, and refusals are raised before any byte is sent), then hand
    back an iterator over it and the rest."""
    try:
        first = await batches.__anext__()
    except StopAsyncIteration:
        first = []
    except BaseException:
        await batches.aclose()  # type: ignore[attr-defined]
        raise

    async def chained() -> AsyncIterator[list[dict[str, Any]]]:
        try:
            if first:
                yield first
            async for batch in batches:
                yield batch
        finally:
            await batches.aclose()  # type: ignore[attr-defined]

    return chained()
