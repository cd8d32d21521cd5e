"""Interop: the official TypeScript SDK client drives tests/helpers/surface_agent.py over stdio.

tests/interop/surface_client.mjs (experimental v2 client API of the pinned @agentclientprotocol/sdk) covers the rest
of the stable v2 surface an agent author reaches through acp-agent: URL-mode questions (accepted, with
``elicitation/complete``; declined; answered ``cancel``; withdrawn after ``session/cancel`` and on
``session/close``), extension methods in both directions (the agent's ``@extension`` request and notification, an
unknown ``_`` method, the agent calling the client's methods through ``session.client.request``, with a timeout and
with ``session/cancel`` withdrawing the call), and ``_meta`` on ``session/new``, ``session/resume``,
``session/prompt`` and a prompt block reaching the agent, and on the agent's message reaching the client. This
module runs it once per agent event loop, checks its summary, validates every agent message against the official
unstable v2 JSON Schema and judges the whole exchange with the ``WireChecker``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "surface_client.mjs"
SURFACE_AGENT = ROOT / "tests" / "helpers" / "surface_agent.py"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_official_typescript_client_url_questions_extensions_and_meta(tmp_path: Path, backend: str) -> None:
    run = run_official_client(tmp_path, CLIENT_SCRIPT, SURFACE_AGENT, wire=True, backend=backend)
    summary = run.summary
    assert summary["agent"]["name"] == "surface-agent"

    assert summary["extensions"] == {
        "echoed": {"echo": {"x": 1, "nested": {"y": [1, 2]}}, "client": "acp-agent-interop-surface"},
        "unknown": -32601,
        "pings": [{"t": 1}],
    }
    assert summary["meta"] == {
        "seen": {"session": {"trace": "new-1"}, "prompt": {"trace": "prompt-1"}, "blocks": [{"block": 1}]},
        "messageMeta": {"echo": {"trace": "prompt-1"}},
        "afterResume": {"session": {"trace": "resume-1"}, "prompt": {"trace": "prompt-1"}, "blocks": [{"block": 1}]},
    }
    assert summary["calls"] == {
        "call": {"from": "typescript-sdk", "hello": 1},
        "missing": "error -32601",
        "slow": "error -32800",
        "slowWithdrawals": 1,
        "wait": {"states": ["running", "idle"], "stopReason": "cancelled", "withdrawals": 1},
    }

    blocked_then_resumed = ["running", "requires_action", "running", "idle"]
    url = summary["url"]
    assert url["accepted"] == {
        "states": blocked_then_resumed, "said": ["url: accept"], "stopReason": "end_turn", "completed": [True]
    }
    assert url["declined"] == {"states": blocked_then_resumed, "said": ["url: decline"], "stopReason": "end_turn"}
    assert url["dismissed"] == {"states": blocked_then_resumed, "said": [], "stopReason": "cancelled"}
    assert url["cancelled"]["states"][:2] == ["running", "requires_action"]
    assert url["cancelled"]["states"][-1] == "idle"
    assert url["cancelled"]["withdrawals"] == 1
    assert url["cancelled"]["stopReason"] == "cancelled"
    assert summary["close"] == {"result": {}, "withdrawn": True}  # R44, R42: withdrawn and idle before the answer
    assert summary["questions"] == 5
    assert summary["agentExitCode"] == 0

    # Only the advertised mode went out (R83 is judged too), each flow with its own elicitationId.
    questions = [m["params"] for m in run.agent_messages if m.get("method") == "elicitation/create"]
    assert {q["mode"] for q in questions} == {"url"}
    assert len({q["elicitationId"] for q in questions}) == 5
