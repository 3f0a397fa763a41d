"""A real MCP server for the tests, written with the official SDK; run as a script.

``python tool_server.py stdio`` serves over stdin/stdout; ``python tool_server.py http PORT`` serves streamable
HTTP at ``http://127.0.0.1:PORT/mcp``. Tools: ``lookup_capital`` (a fixed table), ``add``, ``fail`` (always raises),
``slow`` (sleeps for the seconds it is given) and ``whoami`` (the server's process id and a header it got).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}

server = MCPServer("xinference-test-tools")


@server.tool(description="The capital city of a country.")
def lookup_capital(country: str) -> str:
    capital = CAPITALS.get(country.strip().lower())
    if capital is None:
        raise ValueError(f"no capital known for {country!r}")
    return capital


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails.")
def fail(reason: str = "broken on purpose") -> str:
    raise RuntimeError(reason)


@server.tool(description="Sleep for some seconds, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="The process id of this server.")
def whoami() -> str:
    return str(os.getpid())


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
