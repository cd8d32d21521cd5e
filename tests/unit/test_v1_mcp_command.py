"""A v1 client's stdio MCP server named by a bare command (acpx passes ``"command": "npx"`` verbatim).

Found driving ``examples/coding_agent.py`` with acpx and an ``mcpServers`` entry in ``.acpxrc.json``:
the whole ``session/new`` was refused ``-32602`` "MCP server command must be an absolute path". The
bridge resolves such a command on the agent's ``PATH`` (or against the session's cwd for ``./x``),
and leaves out with one log line an entry it cannot resolve, rather than refusing the session.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from acp_agent.v1 import V1Translator


def _translator() -> V1Translator:
    translator = V1Translator()
    translator.incoming({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    translator.outgoing({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 2, "info": {"name": "a", "version": "1"},
        "capabilities": {"session": {"mcp": {"stdio": {}}}}}})
    return translator


def _forwarded(cwd: str, *servers: dict[str, Any]) -> list[dict[str, Any]]:
    [message], _ = _translator().incoming({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                           "params": {"cwd": cwd, "mcpServers": list(servers)}})
    result: list[dict[str, Any]] = message["params"].get("mcpServers", [])
    return result


def test_a_bare_command_is_resolved_on_the_agents_path(tmp_path: Path) -> None:
    sh = shutil.which("sh")
    assert sh is not None
    server = {"name": "files", "command": "sh", "args": ["-c", "true"], "env": []}
    assert _forwarded(str(tmp_path), server) == [{"type": "stdio", **server, "command": sh}]


def test_a_relative_command_is_resolved_against_the_session_cwd(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "server"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    server = {"name": "local", "command": "./bin/server", "args": [], "env": []}
    assert _forwarded(str(tmp_path), server) == [{"type": "stdio", **server, "command": str(script)}]


def test_an_unknown_command_is_left_out_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    absolute = {"name": "kept", "command": os.path.abspath(str(tmp_path / "x")), "args": [], "env": []}
    missing = {"name": "gone", "command": "no-such-mcp-server-anywhere", "args": [], "env": []}
    with caplog.at_level(logging.WARNING, logger="acp_agent.v1"):
        assert _forwarded(str(tmp_path), absolute, missing) == [{"type": "stdio", **absolute}]
    [line] = [r.getMessage() for r in caplog.records if "gone" in r.getMessage()]
    assert "no-such-mcp-server-anywhere" in line
