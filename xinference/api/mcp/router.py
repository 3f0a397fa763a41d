"""``GET/POST /v1/mcp/servers`` and ``DELETE /v1/mcp/servers/{name}``: the MCP servers the platform uses.

The service is the app's :class:`~xinference.api.mcp.manager.McpHub` (``app.state.mcp``). A server added here is a
``url`` server, unless the operator's config set ``"allowRuntimeCommands": true``: a request never makes the
platform run a command it was not configured with. Like every route, these are behind the API keys.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from xinference.api.mcp.manager import McpHub
from xinference.api.protocol import ResponseBody

__all__ = ["AddServerRequest", "McpServerInfo", "McpServerList", "McpToolInfo", "attach_router"]


# -- protocol ----------------------------------------------------------------------------------------------------------
class AddServerRequest(BaseModel):
    """One server, in the config file's form plus its ``name``: ``{"name", "url", "headers"}`` (or ``command``,
    ``args``, ``env`` when the config allows commands at runtime)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=64, strict=True)
    url: str | None = Field(default=None, description="a streamable HTTP MCP endpoint")
    headers: dict[str, str] | None = Field(default=None, description="sent with every request to url")
    command: str | None = Field(default=None, description="stdio servers: only if the operator allowed them")
    args: list[str] | None = None
    env: dict[str, str] | None = None

    def entry(self) -> dict[str, Any]:
        """The server's config entry (checked by ``config.parse_server``, which names a bad key)."""
        entry = self.model_dump(exclude={"name"}, exclude_none=True)
        entry.update(self.model_extra or {})
        return entry


class McpToolInfo(ResponseBody):
    name: str
    description: str | None = None
    input_schema: dict[str, Any]


class McpServerInfo(ResponseBody):
    name: str
    transport: Literal["stdio", "http"]
    status: Literal["starting", "ready", "failed", "stopped"]
    last_error: str | None = None
    tools: list[McpToolInfo]


class McpServerList(ResponseBody):
    object: Literal["list"] = "list"
    data: list[McpServerInfo]


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _hub(request: Request) -> McpHub:
    hub: McpHub = request.app.state.mcp
    return hub


@router.get("/v1/mcp/servers", response_model=McpServerList)
async def list_servers(request: Request) -> dict[str, Any]:
    return {"object": "list", "data": _hub(request).describe()}


@router.post("/v1/mcp/servers", response_model=McpServerInfo)
async def add_server(body: AddServerRequest, request: Request) -> dict[str, Any]:
    return await _hub(request).add(body.name, body.entry())


@router.delete("/v1/mcp/servers/{name}", status_code=204)
async def remove_server(name: str, request: Request) -> Response:
    await _hub(request).remove(name)
    return Response(status_code=204)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
