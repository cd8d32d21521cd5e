"""Telemetry over real transports: an agent subprocess exports to an OTLP/HTTP receiver on loopback (started by
the test), over stdio (its stdout stays pure JSON-RPC) and over ``python -m acp_agent serve``."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from acp_agent.testing import spawn_agent
from tests.e2e.test_principals_e2e import peer
from tests.helpers.otlp import Receiver, otlp_receiver
from tests.helpers.remote import ROOT, served_agent

pytestmark = pytest.mark.anyio

CODER = ROOT / "docs_src" / "telemetry_agent.py"
FAST = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200", "OTEL_SERVICE_NAME": "coder-e2e"}


def _names(receiver: Receiver) -> list[str]:
    return [span.name for span in receiver.spans]


async def test_a_stdio_agent_exports_its_coding_turn_and_keeps_stdout_pure(tmp_path: Any) -> None:
    traceparent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "ACP_AGENT_DATA_DIR": str(tmp_path),
               "ACP_AGENT_TELEMETRY_COMMANDS": "1", **FAST}
        async with spawn_agent([sys.executable, str(CODER)], env=env, keep_transcript=True) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            view = client.view(sid)
            await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}],
                                                    "_meta": {"traceparent": traceparent}})
            await client.wait_for(lambda: view.idle_count >= 1 and view.background == [])
            sent = [entry.message for entry in client.transcript if entry.direction == "agent->client"]
        assert all("<unparsed>" not in message and message.get("jsonrpc") == "2.0" for message in sent)
        # The agent's own request to the client carries the trace context onward in its _meta.
        [permission] = [m for m in sent if m.get("method") == "session/request_permission"]
        assert permission["params"]["_meta"]["traceparent"].split("-")[1] == "ab" * 16
        receiver.wait_for(lambda: {"execute_tool bash", "execute_tool watch", "terminal"} <= set(_names(receiver))
                          and _names(receiver).count("terminal") == 2)
        receiver.wait_for(lambda: {"acp.turn.duration", "gen_ai.execute_tool.duration", "acp.wire.bytes"}
                          <= receiver.metrics)
    print("\n" + receiver.tree())
    turn = next(s for s in receiver.spans if s.name == "invoke_agent coder")
    assert turn.trace_id == "ab" * 16  # the client's traceparent is the parent
    assert receiver.resource["service.name"] == "coder-e2e"
    tree = receiver.tree()
    assert "    execute_tool bash\n      session/request_permission\n      terminal" in tree
    background = [s for s in receiver.spans if s.name == "terminal" and s.attributes["acp.background"]]
    assert background and background[0].trace_id != turn.trace_id and background[0].links
    assert "process.command_line" in background[0].attributes


def test_a_served_agent_puts_the_principal_and_session_on_its_spans(tmp_path: Any) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-5ecret-token\n")
    tokens.chmod(0o600)
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **FAST}
        with served_agent(ROOT / "examples" / "echo_agent.py", "--tokens", str(tokens), env=env) as served:
            with peer(served.ws_url, additional_headers={"Authorization": "Bearer alice-5ecret-token"}) as alice:
                sid = alice.answer("session/new", {"cwd": str(tmp_path)})["result"]["sessionId"]
                assert "result" in alice.answer("session/prompt", {"sessionId": sid,
                                                                   "prompt": [{"type": "text", "text": "hi"}]})
            receiver.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in receiver.spans))
    prompt = next(s for s in receiver.spans if s.name == "session/prompt")
    assert prompt.attributes["acp.principal"] == "alice" and prompt.attributes["acp.session.id"] == sid
    assert "alice-5ecret-token" not in json.dumps([s.attributes for s in receiver.spans])
    turn = next(s for s in receiver.spans if s.name.startswith("invoke_agent"))
    assert turn.parent_id == prompt.span_id and turn.attributes["gen_ai.conversation.id"] == sid
