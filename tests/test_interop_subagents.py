"""Interop: the official TypeScript SDK's `ActiveSession` drives the permission and subagent rows of
examples/background_agent.py over stdio.

tests/interop/subagent_client.mjs uses the experimental v2 client API of the pinned @agentclientprotocol/sdk:
`/bgask`, whose permission request `session.isForBackgroundWork(request)` must call background work; a
`session/cancel` that must leave that request open (no `$/cancel_request`); the answer `allow-once`, which must reach
the tool call; `/ask`, whose request must not count as background work; and `/subagent 1 ...`, whose child must be in
`session.background` as a subagent item while it runs and leave it afterwards. It fails on any check or any error the
SDK reports. This module runs it, checks its summary, validates every message the agent wrote against the official
unstable v2 JSON Schema, and runs the wire-rule checker over the whole exchange in the order the client saw it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent.testing.checker import WireChecker

from .test_interop import AgentTrafficValidator, _load_schema, official_schema_path, read_jsonl

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parent.parent
INTEROP_DIR = ROOT / "tests" / "interop"
CLIENT_SCRIPT = INTEROP_DIR / "subagent_client.mjs"
BACKGROUND_AGENT = ROOT / "examples" / "background_agent.py"


def wire_violations(wire: list[dict[str, object]]) -> list[str]:
    checker = WireChecker(raise_on_violation=False)
    for entry in wire:
        checker.feed("agent->client" if entry["from"] == "agent" else "client->agent", entry["message"])
    checker.finish()
    return [str(v) for v in checker.violations]


def test_official_typescript_client_sees_background_permissions_and_subagents(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    if not (INTEROP_DIR / "node_modules").is_dir():
        pytest.skip("tests/interop/node_modules is missing; run `make test` (it runs `npm ci`)")
    validator = AgentTrafficValidator(_load_schema(official_schema_path()))

    agent_transcript = tmp_path / "agent.jsonl"
    client_transcript = tmp_path / "client.jsonl"
    wire_log = tmp_path / "wire.jsonl"
    env = {
        **os.environ,
        "ACP_INTEROP_TRANSCRIPT": str(agent_transcript),
        "ACP_INTEROP_CLIENT_TRANSCRIPT": str(client_transcript),
        "ACP_INTEROP_WIRE": str(wire_log),
    }
    proc = subprocess.run(
        [node, str(CLIENT_SCRIPT), sys.executable, str(BACKGROUND_AGENT)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, (
        f"subagent_client.mjs exited with {proc.returncode}\n"
        f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}"
    )

    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line JSON summary on stdout, got:\n{proc.stdout}"
    summary = json.loads(lines[0])
    assert summary["ok"] is True
    assert summary["agent"]["name"] == "background-agent"

    bgask = summary["bgask"]
    assert bgask["forBackground"] is True  # the SDK tells the request apart from foreground ones (R109, R110)
    assert bgask["forBackgroundAfterCancel"] is True
    assert bgask["withdrawn"] is False  # R107: session/cancel left it open
    assert bgask["content"] == ["allowed"]  # the late answer reached the tool call
    assert bgask["finalStatus"] == "completed"
    assert bgask["backgroundAfter"] == []

    ask = summary["ask"]
    assert ask["forBackground"] is False
    assert ask["states"] == ["running", "requires_action", "running", "idle"]
    assert ask["said"] == ["allowed: deploy"]

    sub = summary["subagent"]
    child = sub["childId"]
    assert sub["title"] == "Subagent: hello from the child"
    assert sub["capabilities"] == {"cancel": {}}
    assert sub["listedWhileRunning"] == [{"type": "subagent", "sessionId": child}]
    assert sub["backgroundAfter"] == []
    assert sub["text"] == "hello from the child"
    assert sub["childStates"] == ["running", "idle"] and sub["childStopReason"] == "end_turn"

    assert summary["close"] == {}
    assert summary["agentExitCode"] == 0

    # Schema pass over the recorded traffic, then the wire rules over both directions in order.
    agent_messages = read_jsonl(agent_transcript)
    client_messages = read_jsonl(client_transcript)
    assert len(agent_messages) == summary["messages"]["agent"]
    assert len(client_messages) == summary["messages"]["client"]
    client_requests = {
        json.dumps(message["id"]): message["method"]
        for message in client_messages
        if "method" in message and "id" in message
    }
    for message in agent_messages:
        validator.validate(message, client_requests)
    assert any(m.get("params", {}).get("sessionId") == child for m in agent_messages)  # the child's own updates
    wire = read_jsonl(wire_log)
    assert len(wire) == len(agent_messages) + len(client_messages)
    violations = wire_violations(wire)
    assert not violations, "\n".join(violations)
