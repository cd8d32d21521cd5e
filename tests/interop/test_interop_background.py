"""Interop: the official TypeScript SDK's `ActiveSession` drives examples/background_agent.py over stdio.

tests/interop/background_client.mjs uses the experimental v2 client API of the pinned @agentclientprotocol/sdk:
`/bg sleep 30` then `session.cancelTerminal(id)`, `/watch 30` then `session.cancelToolCall(id)`, then
`session/close`, checking at each step that `session.background`, `canCancelTerminal` and `canCancelToolCall` agree
with what the agent did. It fails on any check or any error the SDK reports. This module runs it, checks its summary,
validates every message the agent wrote against the official unstable v2 JSON Schema, and runs the wire-rule checker
(when available) over the whole exchange in the order the client saw it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "background_client.mjs"
BACKGROUND_AGENT = ROOT / "examples" / "background_agent.py"


def test_official_typescript_client_cancels_background_work(tmp_path: Path) -> None:
    run = run_official_client(tmp_path, CLIENT_SCRIPT, BACKGROUND_AGENT, wire=True)
    summary = run.summary
    assert summary["agent"]["name"] == "background-agent"

    bg = summary["bg"]
    assert bg["cancelResult"] == {}
    assert bg["exitStatus"]["signal"] == "SIGTERM"
    assert bg["backgroundAfterExit"] == []
    assert bg["rawCancelAfterExit"] == -32602  # R104, never -32601
    assert all("does not advertise cancel" in text for text in bg["refusedLocally"])

    watch = summary["watch"]
    assert watch["firstTick"] == "tick 1"
    assert watch["cancelResult"] == {}
    assert watch["finalStatus"] == "cancelled"
    assert watch["backgroundAfterCancel"] == []
    assert watch["rawCancelAfterEnd"] == -32602  # R102, never -32601

    assert summary["close"] == {}
    assert summary["agentExitCode"] == 0
