"""The coding example hosted the documented way (``python -m acp_agent serve examples/coding_agent.py --tokens FILE``)
against an ordinary user (issue 39): bob's stdio MCP entry is refused and never runs, a session at ``/`` or outside
the workspace is refused, an active session cannot be resumed elsewhere; ``--allow-client-mcp`` opts back in."""

from __future__ import annotations

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
