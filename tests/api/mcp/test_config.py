"""The MCP config file: accepted shapes, and every mistake named by its entry; which URLs a request may name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xinference.api.mcp.config import HttpServerConfig, StdioServerConfig, load_config, parse_config
from xinference.api.mcp.manager import check_url_allowed, url_allowed
from xinference.errors import InvalidRequest


def test_both_kinds_of_server_parse() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "search": {"command": "uvx", "args": ["mcp-server-fetch"], "env": {"A": "1"}, "type": "stdio"},
                "remote": {"url": "https://tools.example/mcp", "headers": {"Authorization": "Bearer x"}},
            },
            "allowRuntimeCommands": True,
        }
    )
    assert config.servers["search"] == StdioServerConfig("uvx", ("mcp-server-fetch",), {"A": "1"})
    assert config.servers["remote"] == HttpServerConfig("https://tools.example/mcp", {"Authorization": "Bearer x"})
    assert config.allow_runtime_commands is True
    assert parse_config({}).servers == {}


@pytest.mark.parametrize(
    "data,param,words",
    [
        ([], None, "must be an object"),
        ({"servers": {}}, "servers", "unknown key 'servers'"),
        ({"mcpServers": []}, "mcpServers", "mapping names"),
        ({"mcpServers": {"bad name": {"url": "http://h/mcp"}}}, "mcpServers.bad name", "invalid MCP server name"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a", "exactly one of 'command'"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a", "exactly one of"),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command", "non-empty"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args", "list of strings"),
        ({"mcpServers": {"a": {"command": "x", "env": {"A": 1}}}}, "mcpServers.a.env", "string values"),
        ({"mcpServers": {"a": {"command": "x", "headers": {}}}}, "mcpServers.a.headers", "unknown key 'headers'"),
        ({"mcpServers": {"a": {"url": "ftp://h/x"}}}, "mcpServers.a.url", "http:// or https://"),
        ({"mcpServers": {"a": {"url": "http://h", "headers": []}}}, "mcpServers.a.headers", "string values"),
        ({"allowRuntimeCommands": "yes"}, "allowRuntimeCommands", "true or false"),
    ],
)
def test_mistakes_name_the_entry(data: object, param: str | None, words: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_config(data)
    assert caught.value.param == param
    assert words in caught.value.message


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    with pytest.raises(InvalidRequest, match="cannot read the MCP config"):
        load_config(path)
    path.write_text("{not json")
    with pytest.raises(InvalidRequest, match=f"the MCP config {path} is not JSON"):
        load_config(path)
    path.write_text(json.dumps({"mcpServers": {"t": {"url": "http://127.0.0.1:1/mcp"}}}))
    assert list(load_config(path).servers) == ["t"]


@pytest.mark.parametrize(
    "url,allowed",
    [
        ("http://127.0.0.1:8000/mcp", True),
        ("http://127.0.0.1:8000/mcp/", True),
        ("http://127.0.0.1:8000/mcp/sub", True),
        ("http://127.0.0.1:8000/mcpx", False),
        ("http://127.0.0.1:8001/mcp", False),
        ("https://127.0.0.1:8000/mcp", False),
        ("http://127.0.0.1:8000.evil.example/mcp", False),
        ("http://user:pw@127.0.0.1:8000/mcp", False),
        ("https://tools.example/anything", True),
        ("https://TOOLS.example:443/x", True),
        ("https://tools.example.evil/x", False),
        ("file:///etc/passwd", False),
        ("not a url", False),
    ],
)
def test_url_prefixes_match_whole_parts(url: str, allowed: bool) -> None:
    prefixes = ("http://127.0.0.1:8000/mcp", "https://tools.example")
    assert url_allowed(url, prefixes) is allowed


def test_no_url_is_allowed_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XINFERENCE_MCP_ALLOWED_URLS", raising=False)
    with pytest.raises(InvalidRequest, match="XINFERENCE_MCP_ALLOWED_URLS") as caught:
        check_url_allowed("http://127.0.0.1:8000/mcp", "tools[0].server_url")
    assert caught.value.param == "tools[0].server_url"
    monkeypatch.setenv("XINFERENCE_MCP_ALLOWED_URLS", "http://127.0.0.1:8000/mcp, https://x.example")
    check_url_allowed("http://127.0.0.1:8000/mcp", "server_url")
