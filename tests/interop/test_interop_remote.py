"""Interop over the remote transports: the official TypeScript SDK 2.4.0 clients drive the examples served by
``python -m acp_agent serve`` over Streamable HTTP (``createHttpStream``) and WebSocket (``createWebSocketStream``
with the ``ws`` package).

The scenarios are the stdio interop scripts unchanged (echo with cancels; ``/bg`` + terminal cancel and ``/watch`` +
tool call cancel; ``/subagent``, ``/ask`` and ``/bgask``); every agent message is validated against the official
schema, and the background run also goes through the wire-rule checker in the order the client saw it. Each
server serves one client after another; after each client the connection's processes must be gone, and at the end
the server must exit 0 on SIGTERM with no child left.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client
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
