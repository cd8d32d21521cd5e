"""Interop: the official TypeScript SDK client drives examples/login_agent.py over stdio.

tests/interop/login_client.mjs (experimental v2 client API of the pinned @agentclientprotocol/sdk) goes through the
auth gate (``session/new`` before ``auth/login`` and after ``auth/logout`` is -32000), a login that asks a
request-scoped form (declined: -32000; the login withdrawn by the client while its form waits: the agent withdraws
the form and answers -32800; accepted: ``{}``), and forms asked by ``/ask`` (accepted, declined, answered
``cancel``, and withdrawn by the agent with ``$/cancel_request`` after ``session/cancel``), answering them through
the SDK's ``elicitation/create`` handler. It fails on any check or any error the SDK reports. This module runs it
once per agent event loop, checks its summary, validates every agent message against the official unstable v2
JSON Schema and judges the whole exchange with the ``WireChecker``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "login_client.mjs"
LOGIN_AGENT = ROOT / "examples" / "login_agent.py"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_official_typescript_client_logs_in_and_answers_forms(tmp_path: Path, backend: str) -> None:
    run = run_official_client(tmp_path, CLIENT_SCRIPT, LOGIN_AGENT, wire=True, backend=backend)
    summary = run.summary
    assert summary["agent"]["name"] == "login-agent"
    assert {"type": "agent", "methodId": "agent-login"}.items() <= summary["authMethods"][0].items()

    assert summary["beforeLogin"] == -32000
    login = summary["login"]
    assert login["declined"] == -32000
    assert login["afterRefused"] == -32000
    assert login["withdrawn"] == {"code": -32800, "formWithdrawn": True}  # R16: still answered, once
    assert login["afterWithdrawn"] == -32000
    assert login["accepted"] == {}
    assert login["questionScope"] == ["requestId"]
    assert login["requestIdIsLogin"] is True

    blocked_then_resumed = ["running", "requires_action", "running", "idle"]
    assert summary["accept"] == {
        "states": blocked_then_resumed, "said": ["Hello, Ada Lovelace"], "stopReason": "end_turn"
    }
    assert summary["decline"] == {
        "states": blocked_then_resumed, "said": ["You declined to answer."], "stopReason": "end_turn"
    }
    assert summary["dismissed"] == {"states": blocked_then_resumed, "said": [], "stopReason": "cancelled"}
    cancelled = summary["cancelled"]
    assert cancelled["states"][:2] == ["running", "requires_action"]
    assert cancelled["states"][-1] == "idle"
    assert cancelled["withdrawn"] is True
    assert cancelled["withdrawals"] == 1
    assert cancelled["stopReason"] == "cancelled"

    assert summary["logout"] == {"result": {}, "newSession": -32000, "prompt": -32000}
    assert summary["questions"] == 7
    assert summary["agentExitCode"] == 0

    # The raw wire, as the schema validator saw it: one request-scoped form per login, four session-scoped ones;
    # the agent withdrew the form of the withdrawn login and the form of the cancelled turn.
    forms = [m["params"] for m in run.agent_messages if m.get("method") == "elicitation/create"]
    assert ["requestId" in f for f in forms] == [True, True, True, False, False, False, False]
    assert all(f["mode"] == "form" for f in forms)
    withdrawn = [m["params"]["requestId"] for m in run.agent_messages if m.get("method") == "$/cancel_request"]
    asked = [m["id"] for m in run.agent_messages if m.get("method") == "elicitation/create"]
    assert withdrawn == [asked[1], asked[-1]]
