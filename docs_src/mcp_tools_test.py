from typing import Any

import pytest

from acp_agent.testing import HostedMcpRequest, McpErrorAnswer, connect_agent
from docs_src.mcp_tools import ToolAgent

pytestmark = pytest.mark.anyio  # every test on each anyio backend installed


def calc(request: HostedMcpRequest) -> dict[str, Any]:
    if request.method == "tools/list":
        return {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}
    if request.method != "tools/call":
        raise McpErrorAnswer(-32601, f"Method not found: {request.method}")
    return {"content": [{"type": "text", "text": str(request.arguments["a"] + request.arguments["b"])}]}


async def test_add() -> None:
    async with connect_agent(ToolAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp", mcpServers=[client.host_mcp_server("calc", calc)])
        view = await client.prompt_and_wait(sid, "add 2 and 3")
        assert list(view.messages().values()) == ["5"]
