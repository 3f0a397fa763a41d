"""``--mcp-config`` on xinference-local and xinference-supervisor: a bad file stops the command before anything
starts, with a message naming the entry; the option also reads ``XINFERENCE_MCP_CONFIG``."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from xinference.deploy.cluster import supervisor_main
from xinference.deploy.local import main as local_main


@pytest.mark.parametrize("command", [local_main, supervisor_main])
def test_a_bad_config_is_a_usage_error(command: click.Command, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"search": {"url": "ftp://host/"}}}))
    result = CliRunner().invoke(command, ["--mcp-config", str(config)])
    assert result.exit_code == 2
    assert f"--mcp-config: {config}: mcpServers.search.url must be an http" in result.output.replace("\n", "")
    missing = CliRunner().invoke(command, [], env={"XINFERENCE_MCP_CONFIG": str(tmp_path / "none.json")})
    assert missing.exit_code == 2 and "cannot read the MCP config" in missing.output
    assert "--mcp-config" in CliRunner().invoke(command, ["--help"]).output
