"""The coding example hosted the documented way (``python -m acp_agent serve examples/coding_agent.py --tokens FILE``)
against an ordinary user (issue 39): bob's stdio MCP entry is refused and never runs, a session at ``/`` or outside
the workspace is refused, an active session cannot be resumed elsewhere; ``--allow-client-mcp`` opts back in."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

from tests.e2e.test_principals_e2e import INITIALIZE, TOKENS, Peer, tokens_file
from tests.helpers.remote import ROOT, served_agent

EXAMPLE = ROOT / "examples" / "coding_agent.py"
NO_KEYS = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}


@contextmanager
def peer(url: str, **options: Any) -> Iterator[tuple[Peer, dict[str, Any]]]:
    """A WebSocket client and the ``initialize`` answer's capabilities."""
    with connect(url, open_timeout=10, **options) as socket:
        client = Peer(socket)
        yield client, client.answer("initialize", INITIALIZE)["result"]["capabilities"]


def test_bob_cannot_run_a_command_through_an_mcp_entry_nor_leave_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    (workspace / "bob").mkdir(parents=True)
    marker = tmp_path / "marker"
    evil = {"type": "stdio", "name": "evil", "command": "/bin/sh", "args": ["-c", f"touch {marker}"], "env": []}
    bearer = {"Authorization": f"Bearer {TOKENS['bob']}"}
    with served_agent(EXAMPLE, "--tokens", str(tokens_file(tmp_path)), "--store", "memory",
                      "--workspace", str(workspace), env=NO_KEYS) as served:
        with peer(served.ws_url, additional_headers=bearer) as (bob, capabilities):
            assert "mcp" not in capabilities["session"]  # serve used to advertise session.mcp.stdio
            cwd = str(workspace / "bob")
            refused = bob.answer("session/new", {"cwd": cwd, "mcpServers": [evil]})["error"]
            assert refused["code"] == -32602 and refused["data"] == {"name": "evil", "type": "stdio"}
            for outside in ("/", str(tmp_path)):
                refused = bob.answer("session/new", {"cwd": outside})["error"]
                assert refused["code"] == -32602 and refused["data"] == {"field": "cwd", "path": outside}
            sid = bob.answer("session/new", {"cwd": cwd})["result"]["sessionId"]
            for params in ({"cwd": "/"}, {"cwd": cwd, "mcpServers": [evil]}):
                assert bob.answer("session/resume", {"sessionId": sid, **params})["error"]["code"] == -32602
            answer = bob.answer("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
            assert "result" in answer
            time.sleep(1.0)  # the turn runs; an MCP server would have started before the model acted
        assert not marker.exists()
    with served_agent(EXAMPLE, "--store", "memory", "--workspace", str(workspace), "--allow-client-mcp",
                      env=NO_KEYS) as served, peer(served.ws_url) as (_, capabilities):
        assert capabilities["session"]["mcp"] == {"stdio": {}, "http": {}}  # the operator opted in


def test_serve_refuses_a_workspace_that_holds_its_tokens_file_or_store(tmp_path: Path) -> None:
    """Trial 39: the operator ran ``serve examples/coding_agent.py --tokens tokens.txt`` in the directory holding
    ``tokens.txt`` (the default workspace); bob's ``read tokens.txt`` (``read_file``, no approval) answered alice's
    token, and ``search alice`` found her prompts in the default store's journal under ``~/.local/share``."""
    server_dir = tmp_path / "srv"
    server_dir.mkdir()
    tokens = tokens_file(server_dir)
    environment = {**os.environ, **NO_KEYS, "ACP_AGENT_DATA_DIR": str(server_dir / "data"),
                   "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "acp_agent", "serve", str(EXAMPLE), "--port", "0"]
    for extra in (["--tokens", tokens.name, "--store", "memory"],
                  ["--tokens", str(tokens), "--store", f"sqlite:{tmp_path}/s.sqlite3", "--workspace", str(tmp_path)],
                  []):  # the data directory (the default store) under the directory serve starts in
        done = subprocess.run([*command, *extra], cwd=server_dir, env=environment, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, done.stderr
        assert "is inside the workspace" in done.stderr and "every user's file tools could read it" in done.stderr
    assert "the tokens file" in done.stderr or "the data directory" in done.stderr
