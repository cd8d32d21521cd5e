"""Real v1 clients drive the examples through the v1 bridge.

The official Python SDK's client (``agent-client-protocol``, tests/interop/v1_python_client.py) and the official
TypeScript SDK's stable v1 client (``@agentclientprotocol/sdk`` main entry point, tests/interop/v1_client.mjs) each
drive examples/echo_agent.py and examples/background_agent.py. Each script fails on any error its SDK reports; this
module then validates every line the agent wrote against the official v1 schemas shipped in the npm package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.interop import INTEROP_DIR, NODE_MODULES, ROOT, AgentTrafficValidator, load_schema, read_jsonl

pytestmark = pytest.mark.interop

V1_SCHEMAS = [NODE_MODULES / "@agentclientprotocol" / "sdk" / "schema" / "v1" / name
              for name in ("schema.unstable.json", "schema.json")]
AGENTS = {"echo": ROOT / "examples" / "echo_agent.py", "background": ROOT / "examples" / "background_agent.py"}


def _validate_v1(agent_messages: list[dict[str, Any]], client_messages: list[dict[str, Any]]) -> None:
    for path in V1_SCHEMAS:
        if not path.is_file():
            pytest.fail(f"{path.relative_to(ROOT)} is missing; run `make test` (it runs `npm ci`)")
        validator = AgentTrafficValidator(load_schema(path))
        requests = {json.dumps(m["id"]): m["method"] for m in client_messages if "method" in m and "id" in m}
        for message in agent_messages:
            validator.validate(message, requests)


def _run(tmp_path: Path, command: list[str]) -> dict[str, Any]:
    agent_log, client_log = tmp_path / "agent.jsonl", tmp_path / "client.jsonl"
    env = {**os.environ, "ACP_INTEROP_TRANSCRIPT": str(agent_log), "ACP_INTEROP_CLIENT_TRANSCRIPT": str(client_log),
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    summary: dict[str, Any] = json.loads(lines[0])
    assert summary["ok"] is True
    agent_messages, client_messages = read_jsonl(agent_log), read_jsonl(client_log)
    assert agent_messages and client_messages
    _validate_v1(agent_messages, client_messages)
    # Nothing v2-only reaches a v1 client.
    kinds = {m["params"]["update"]["sessionUpdate"] for m in agent_messages if m.get("method") == "session/update"}
    assert not kinds & {"state_update", "user_message", "agent_message", "tool_call_content_chunk",
                        "terminal_update", "terminal_output_chunk", "plan_update"}, kinds
    return summary


def _python_client(scenario: str) -> list[str]:
    pytest.importorskip("acp", reason="agent-client-protocol is installed by `make test` (the test extra)")
    return [sys.executable, str(INTEROP_DIR / "v1_python_client.py"), scenario, sys.executable, str(AGENTS[scenario])]


def _typescript_client(scenario: str) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    if not NODE_MODULES.is_dir():
        pytest.skip("tests/interop/node_modules is missing; run `make test` (it runs `npm ci`)")
    return [node, str(INTEROP_DIR / "v1_client.mjs"), scenario, sys.executable, str(AGENTS[scenario])]


@pytest.mark.parametrize("client", [_python_client, _typescript_client], ids=["python-sdk", "typescript-sdk"])
def test_v1_client_drives_echo_agent(tmp_path: Path, client: Any) -> None:
    summary = _run(tmp_path, client("echo"))
    assert summary["protocolVersion"] == 1
    assert summary["agent"] == "echo-agent"
    assert summary["loadSession"] is True
    assert summary["first"] == {"stopReason": "end_turn", "agentText": "hello interop"}
    # v1: a prompt cancelled by session/cancel answers `cancelled` (or ends normally if it had finished first).
    assert summary["cancel"]["stopReason"] in ("cancelled", "end_turn")
    assert summary["afterCancel"] == {"stopReason": "end_turn", "agentText": "still here after cancel"}
    # session/load replays the conversation as v1 chunks before answering.
    assert summary["load"]["userText"].startswith("hello interop")
    assert summary["load"]["userText"].endswith("still here after cancel")
    assert summary["load"]["agentText"].endswith("still here after cancel")
    assert summary["setMode"] == -32602  # the echo agent offers no modes
    assert summary["authenticate"] == -32602  # and no authentication methods
    assert summary["close"] == {}
    assert summary["agentExitCode"] == 0


@pytest.mark.parametrize("client", [_python_client, _typescript_client], ids=["python-sdk", "typescript-sdk"])
def test_v1_client_drives_background_agent(tmp_path: Path, client: Any) -> None:
    summary = _run(tmp_path, client("background"))
    assert summary["protocolVersion"] == 1
    assert summary["agent"] == "background-agent"
    # /run: the terminal's output is shown inside its tool call, which ends with the process.
    assert summary["run"] == {"stopReason": "end_turn", "status": "completed", "kind": "execute", "output": True}
    # /bg: the turn ends while the process runs; the tool call stays in progress and ends with the exit.
    assert summary["bg"] == {"stopReason": "end_turn", "statusAtTurnEnd": "in_progress", "finalStatus": "completed",
                             "output": True}
    assert summary["ask"] == {"stopReason": "end_turn", "permissions": 1, "agentText": "allowed: deploy"}
    assert summary["cancel"] == {"stopReason": "cancelled"}
    assert summary["close"] == {}
    assert summary["agentExitCode"] == 0
