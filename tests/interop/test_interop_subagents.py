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

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "subagent_client.mjs"
BACKGROUND_AGENT = ROOT / "examples" / "background_agent.py"


def test_official_typescript_client_sees_background_permissions_and_subagents(tmp_path: Path) -> None:
    run = run_official_client(tmp_path, CLIENT_SCRIPT, BACKGROUND_AGENT, wire=True)
    summary = run.summary
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
    assert any(m.get("params", {}).get("sessionId") == child for m in run.agent_messages)  # the child's own updates
