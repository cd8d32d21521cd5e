"""Interop: the official TypeScript SDK client drives tests/helpers/bookkeeping_agent.py over stdio.

tests/interop/bookkeeping_client.mjs (experimental v2 client API of the pinned @agentclientprotocol/sdk) sends
every unstable bookkeeping and providers method to a real agent process: ``session/set_title``,
``session/archive`` (of a session whose turn is running), ``session/unarchive``, ``session/status``, the
``archived`` filter of ``session/list``, ``providers/list``, ``providers/set`` (with a secret header) and
``providers/disable``; then a second agent process on the same SQLite file lists what the first one stored. The
SDK validates every answer with its own zod schemas; this module also validates every agent message against the
official unstable v2 JSON Schema, judges the exchange with the ``WireChecker``, and checks the secret never came
back, neither on the wire nor in the agent's stderr (logging at DEBUG).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "bookkeeping_client.mjs"
AGENT = ROOT / "tests" / "helpers" / "bookkeeping_agent.py"
SECRET = "sk-interop-5ecret-never-echo-77"
MAIN = {"providerId": "main", "supported": ["anthropic", "openai"], "required": True}
EMBEDDINGS = {"providerId": "embeddings", "supported": ["openai"], "required": False}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_official_typescript_client_bookkeeping_and_providers(tmp_path: Path, backend: str) -> None:
    env = {"ACP_INTEROP_SECRET": SECRET, "ACP_AGENT_LOG_LEVEL": "DEBUG"}
    for phase in ("first", "second"):
        (tmp_path / phase).mkdir()
    first = run_official_client(tmp_path / "first", CLIENT_SCRIPT, AGENT, wire=True, backend=backend,
                                env={**env, "ACP_INTEROP_PHASE": "first"})
    summary = first.summary
    assert summary["capabilities"] == {
        "session": {"delete": {}, "title": {}, "archive": {}, "status": {}}, "providers": {}}
    providers = summary["providers"]
    assert providers["declared"] == [
        {**MAIN, "current": {"apiType": "anthropic", "baseUrl": "https://api.anthropic.com"}}, EMBEDDINGS]
    assert providers["set"] == {} and providers["disabled"] == {}
    assert providers["afterSet"][0]["current"] == {"apiType": "openai", "baseUrl": "https://gateway.example/v1"}
    assert (providers["unknown"], providers["unsupported"], providers["required"]) == (-32602, -32602, -32602)
    assert providers["afterDisable"][1] == EMBEDDINGS  # disabled: no current endpoint

    assert summary["title"] == {"answer": {"title": "Kept title"}, "update": {"title": "Kept title"},
                                "empty": -32602, "stored": {"title": "Stored title"}}
    assert summary["archive"] == {"answer": {}, "stopReason": "cancelled", "again": {}, "afterwards": 0}
    assert summary["statuses"] == {"a": {"status": "open", "state": {"state": "idle", "background": []}},
                                   "b": {"status": "saved"}, "c": {"status": "saved"}}
    assert summary["unknown"] == {"status": -32002, "title": -32002, "archive": -32002,
                                  "statusData": {"sessionId": "sess_unknown"}}
    ids = summary["sessions"]
    a = {"id": ids["a"], "title": "Kept title", "archived": False}
    b = {"id": ids["b"], "title": None, "archived": True}
    c = {"id": ids["c"], "title": "Stored title", "archived": False}
    lists = {name: by_id(found) for name, found in summary["lists"].items()}  # listed most recently active first
    assert lists == {"default": by_id([a, c]), "exclude": by_id([a, c]), "only": [b], "include": by_id([a, b, c]),
                     "bad": -32602}

    second = run_official_client(tmp_path / "second", CLIENT_SCRIPT, AGENT, wire=True, backend=backend,
                                 env={**env, "ACP_INTEROP_PHASE": "second", "ACP_INTEROP_SESSIONS": json.dumps(ids)})
    after = second.summary
    assert {name: by_id(found) for name, found in after["listed"].items()} == {"default": by_id([a, c]), "only": [b]}
    assert after["statuses"]["before"] == {"status": "saved"}
    assert after["statuses"]["after"] == {"status": "open", "state": {"state": "idle", "background": []}}
    assert after["unarchived"] == {}
    assert by_id(after["afterUnarchive"]) == by_id([a, {**b, "archived": False}, c])
    # Provider endpoints live in the agent process: a new one starts from its declaration.
    assert after["providers"][0]["current"] == {"apiType": "anthropic", "baseUrl": "https://api.anthropic.com"}

    for run in (first, second):
        assert run.summary["agentExitCode"] == 0
        assert SECRET not in json.dumps(run.agent_messages)
        assert SECRET not in run.stderr
    assert SECRET in json.dumps(first.client_messages)
    assert "provider main now speaks openai" in first.stderr  # the agent really logged at DEBUG


def by_id(found: Any) -> Any:
    """A listing in id order (the order it was listed in is the order of activity, checked elsewhere)."""
    return sorted(found, key=lambda s: s["id"]) if isinstance(found, list) else found
