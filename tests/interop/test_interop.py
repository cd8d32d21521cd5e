"""Interop: the official TypeScript SDK client drives examples/echo_agent.py over stdio.

tests/interop/echo_client.mjs uses the experimental v2 client API of the pinned @agentclientprotocol/sdk (see
tests/interop/package.json) and fails on any check or any error the SDK reports. This module runs it and then
validates every message the agent wrote against the official unstable v2 JSON Schema shipped in that package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "echo_client.mjs"
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"


def test_official_typescript_client_drives_echo_agent(tmp_path: Path) -> None:
    summary = run_official_client(tmp_path, CLIENT_SCRIPT, ECHO_AGENT).summary
    assert summary["protocolVersion"] == 2
    assert summary["agent"]["name"] == "echo-agent"
    assert summary["first"]["agentText"] == "hello interop"
    assert summary["first"]["stopReason"] == "end_turn"
    # A prompt with session/cancel right behind it is either inserted (and ends end_turn or cancelled) or
    # refused with -32800 before insertion; one cancelled after insertion always ends one of the two ways.
    assert summary["cancel"]["prompt"] in ("inserted", "refused -32800")
    if summary["cancel"]["prompt"] == "inserted":
        assert summary["cancel"]["stopReason"] in ("end_turn", "cancelled")
    assert summary["cancelAfterInsert"]["prompt"] == "inserted"
    assert summary["cancelAfterInsert"]["stopReason"] in ("end_turn", "cancelled")
    assert summary["afterCancel"]["stopReason"] == "end_turn"
    assert summary["afterCancel"]["agentText"] == "still here after cancel"
    assert summary["close"] == {}
    assert summary["agentExitCode"] == 0
