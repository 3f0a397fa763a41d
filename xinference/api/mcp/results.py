"""What an MCP tool is and what a call of it returned, as the platform passes them around (no SDK types here: the
SDK loads with the first connection, see :mod:`xinference.api.mcp.link`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ERROR_MAX", "ToolInfo", "ToolResult"]

#: longest error text kept as a server's ``last_error`` or a connection's end reason
ERROR_MAX = 500


@dataclass(frozen=True)
class ToolInfo:
    """One tool of a server, as ``tools/list`` gave it."""

    name: str
    description: str | None
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned: its content as text (``output``) and whether the tool reported an error."""

    output: str
    is_error: bool = False
    structured: dict[str, Any] | None = None
