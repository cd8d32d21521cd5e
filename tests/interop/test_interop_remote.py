"""Interop over the remote transports: the official TypeScript SDK 2.4.0 clients drive the examples served by
``python -m acp_agent serve`` over Streamable HTTP (``createHttpStream``) and WebSocket (``createWebSocketStream``
with the ``ws`` package).

The scenarios are the stdio interop scripts unchanged (echo with cancels; ``/bg`` + terminal cancel and ``/watch`` +
tool call cancel; ``/subagent``, ``/ask`` and ``/bgask``); every agent message is validated against the official
schema, and the background run also goes through the wire-rule checker in the order the client saw it. Each
server serves one client after another; after each client the connection's processes must be gone, and at the end
the server must exit 0 on SIGTERM with no child left.

Reconnect (``reconnect_client.mjs``): a client loses its connection (over HTTP its network fails: no DELETE, its
event stream cut; over WebSocket its socket is destroyed without a close frame), opens a new one with the same
cookie store, finds its session in ``session/list`` and resumes it with replay, then prompts again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.interop import (
    INTEROP_DIR,
    NODE_MODULES,
    ROOT,
    AgentTrafficValidator,
    load_schema,
    official_schema_path,
    read_jsonl,
    run_official_client,
)
from tests.helpers.remote import ServedAgent, served_agent, wait_until

pytestmark = pytest.mark.interop

ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
BACKGROUND_AGENT = ROOT / "examples" / "background_agent.py"
TRANSPORTS = ["http", "ws"]


@pytest.fixture(scope="module")
def echo_server() -> Iterator[ServedAgent]:
    with served_agent(ECHO_AGENT) as served:
        yield served


@pytest.fixture(scope="module")
def background_server() -> Iterator[ServedAgent]:
    with served_agent(BACKGROUND_AGENT) as served:
        yield served


def _no_children_left(served: ServedAgent) -> None:
    wait_until(lambda: not served.children(), 10, "the connection's processes to be gone")
    assert served.proc.poll() is None, served.log()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_official_client_drives_echo_agent_remotely(tmp_path: Path, echo_server: ServedAgent, transport: str) -> None:
    summary = run_official_client(
        tmp_path, INTEROP_DIR / "echo_client.mjs", ECHO_AGENT, remote=(echo_server.url, transport)
    ).summary
    assert summary["agent"]["name"] == "echo-agent"
    assert summary["first"]["agentText"] == "hello interop"
    assert summary["first"]["stopReason"] == "end_turn"
    assert summary["cancelAfterInsert"]["stopReason"] in ("end_turn", "cancelled")
    assert summary["afterCancel"]["agentText"] == "still here after cancel"
    assert summary["close"] == {}
    _no_children_left(echo_server)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_official_client_cancels_background_work_remotely(
    tmp_path: Path, background_server: ServedAgent, transport: str
) -> None:
    run = run_official_client(
        tmp_path, INTEROP_DIR / "background_client.mjs", BACKGROUND_AGENT, wire=True,
        remote=(background_server.url, transport),
    )
    summary = run.summary
    assert summary["bg"]["cancelResult"] == {}
    assert summary["bg"]["exitStatus"]["signal"] == "SIGTERM"
    assert summary["bg"]["backgroundAfterExit"] == []
    assert summary["bg"]["rawCancelAfterExit"] == -32602
    assert summary["watch"]["firstTick"] == "tick 1"
    assert summary["watch"]["finalStatus"] == "cancelled"
    assert summary["watch"]["rawCancelAfterEnd"] == -32602
    assert summary["close"] == {}
    _no_children_left(background_server)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_official_client_runs_subagents_and_permissions_remotely(
    tmp_path: Path, background_server: ServedAgent, transport: str
) -> None:
    run = run_official_client(
        tmp_path, INTEROP_DIR / "subagent_client.mjs", BACKGROUND_AGENT, remote=(background_server.url, transport)
    )
    assert run.summary["ok"] is True
    _no_children_left(background_server)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_official_client_resumes_its_session_after_losing_its_connection(
    tmp_path: Path, echo_server: ServedAgent, transport: str
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    if not NODE_MODULES.is_dir():
        pytest.skip("tests/interop/node_modules is missing; run `make test` (it runs `npm ci`)")
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("A", "B")}
    env = {**os.environ, "ACP_INTEROP_URL": echo_server.url, "ACP_INTEROP_TRANSPORT": transport,
           "ACP_RECONNECT_LOG_A": str(logs["A"]), "ACP_RECONNECT_LOG_B": str(logs["B"])}
    proc = subprocess.run([node, str(INTEROP_DIR / "reconnect_client.mjs")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}\n{echo_server.log()}"
    summary = json.loads(proc.stdout)
    assert summary["ok"] is True and summary["resumed"] == {} and summary["closed"] == {}
    assert summary["replayed"] >= 3  # the user message, the agent message, the snapshot
    validator = AgentTrafficValidator(load_schema(official_schema_path()))
    for name, path in logs.items():  # each connection numbers its requests from 0: validate them apart
        entries = read_jsonl(path)
        sent = [e["message"] for e in entries if e["from"] == "client"]
        received = [e["message"] for e in entries if e["from"] == "agent"]
        assert (len(received), len(sent)) == (summary["messages"][name]["agent"], summary["messages"][name]["client"])
        requests = {json.dumps(m["id"]): m["method"] for m in sent if "method" in m and "id" in m}
        for message in received:
            validator.validate(message, requests)
    # Over HTTP no DELETE reached the server: the lost connection (idle expiry: 300 s) still had the session, and
    # the resume took it over; over WebSocket it waited for the dropped connection's close to save it.
    _no_children_left(echo_server)
