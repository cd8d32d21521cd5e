"""Interop: the official TypeScript SDK client hosts an MCP server that examples/mcp_agent.py calls over ACP.

tests/interop/mcp_client.mjs registers a ``calc`` MCP server with the SDK's own ``McpOverAcpProvider`` (the
client side of the unstable MCP-over-ACP binding) and passes its ``type: "acp"`` declaration to ``session/new``.
The agent process lists the server's tools and calls them through ``session.acp_mcp_servers``: a real tool call
round trip with progress notifications, an inner MCP error, ``session/cancel`` withdrawing a call in flight (the
provider's handler is aborted), and a call after the registration is disposed (the provider's ``-33001``). This
module runs it once per agent event loop, checks its summary, validates every agent message against the official
unstable v2 JSON Schema and judges the whole exchange with the ``WireChecker``; then once over each remote
transport (``python -m acp_agent serve``: Streamable HTTP and WebSocket), where the agent's ``mcp/message``
requests and the client's notifications travel the server's streams.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, InteropRun, run_official_client
from tests.helpers.remote import ServedAgent, served_agent

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "mcp_client.mjs"
MCP_AGENT = ROOT / "examples" / "mcp_agent.py"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[ServedAgent]:
    with served_agent(MCP_AGENT) as served:
        yield served


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_official_typescript_client_hosts_an_mcp_server_over_acp(tmp_path: Path, backend: str) -> None:
    check(run_official_client(tmp_path, CLIENT_SCRIPT, MCP_AGENT, wire=True, backend=backend))


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_mcp_over_acp_over_the_remote_transports(tmp_path: Path, mcp_server: ServedAgent, transport: str) -> None:
    check(run_official_client(tmp_path, CLIENT_SCRIPT, MCP_AGENT, wire=True, remote=(mcp_server.url, transport)))
    assert mcp_server.proc.poll() is None, mcp_server.log()


def check(run: InteropRun) -> None:
    summary: dict[str, Any] = run.summary
    assert summary["agent"]["name"] == "mcp-tool-agent"
    assert summary["mcpCapabilities"] == {"acp": {}}

    # The round trip: the SDK's provider accepted the agent's MCP metadata and served tools/list and tools/call.
    add = summary["add"]
    assert add["said"] == "add says: 5"
    assert add["meta"] == {"version": summary["protocolVersion"],
                           "clientInfo": {"name": "mcp-tool-agent", "title": "MCP Tool Agent", "version": "1.0.0"}}
    assert add["toolCall"] == {"name": "add", "status": "completed", "rawInput": {"a": 2, "b": 3},
                               "rawOutput": {"sum": 5}, "content": ["progress: 1", "progress: 2", "5"]}

    assert summary["divide"] == "divide failed: division by zero"  # the inner MCP error
    assert summary["unknown"] == "No tool named 'nope'. Tools: add, divide, wait."
    assert summary["cancelled"] == {"stopReason": "cancelled", "aborted": True, "withdrawals": 1, "answer": -32800,
                                    "toolCall": "cancelled"}
    assert summary["disposed"] == {"code": -33001, "message": "MCP server registration unavailable"}
    assert summary["serverCalls"] == ["tools/list", "tools/call add", "tools/list", "tools/call divide",
                                      "tools/list", "tools/list", "tools/call wait"]
    assert summary["agentExitCode"] == 0

    # Every inner request carried the binding's metadata; ids are fresh per request.
    requests = [m["params"] for m in run.agent_messages if m.get("method") == "mcp/message"]
    assert len(requests) == summary["mcpRequests"] == 8
    assert all(r["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28" for r in requests)
    assert len({r["requestId"] for r in requests}) == len(requests)
