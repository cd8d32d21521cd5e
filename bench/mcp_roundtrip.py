"""What one MCP-over-ACP tool call costs: ``call_tool`` through ``mcp/message`` to a client-hosted server.

Run: ``.venv/bin/python bench/mcp_roundtrip.py [--calls N]``. The agent and the in-memory test client
(which hosts the MCP server) share one process and one event loop, so the figure is the SDK's own cost
per call in both directions (framing, validation, routing, the checker the test client runs), not a
network's. Prints the median of 5 rounds per backend: the baseline (a client extension request,
``session.client.request``, through the same connection), then ``call_tool`` plain and with an
``on_notification`` callback that receives one progress notification per call.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from acp_agent import Agent, ContentBlock, McpNotification, Session, StopReason
from acp_agent._wire.connection import Method
from acp_agent.testing import HostedMcpRequest, connect_agent


async def _add(request: HostedMcpRequest) -> Any:
    request.notify("notifications/progress", {"progressToken": "t", "progress": 1})
    args = request.arguments
    return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}


class Caller(Agent):
    """Calls ``add`` ``calls`` times per prompt and records seconds per call."""

    mcp_acp = True

    def __init__(self, calls: int, mode: str) -> None:
        self.calls = calls
        self.notify = mode == "notify"
        self.baseline = mode == "baseline"
        self.per_call = 0.0

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        if self.baseline:
            start = time.perf_counter()
            for i in range(self.calls):
                await session.client.request("_bench/echo", {"a": i})
            self.per_call = (time.perf_counter() - start) / self.calls
            return "end_turn"
        server = session.acp_mcp_servers["calc"]
        seen: list[McpNotification] = []
        handler = seen.append if self.notify else None
        start = time.perf_counter()
        for i in range(self.calls):
            result = await server.call_tool("add", {"a": i, "b": 1}, on_notification=handler)
            assert result.text == str(i + 1)
        self.per_call = (time.perf_counter() - start) / self.calls
        assert len(seen) == (self.calls if self.notify else 0)
        return "end_turn"


async def _echo(params: Any) -> Any:
    return params


async def _round(calls: int, mode: str) -> float:
    agent = Caller(calls, mode)
    async with connect_agent(agent, keep_transcript=False, check=False) as client:
        client.connection.requests["_bench/echo"] = Method(_echo)
        await client.initialize()
        sid = await client.new_session("/tmp", mcpServers=[client.host_mcp_server("calc", _add)])
        client.mcp.requests.clear()
        await client.prompt_and_wait(sid, "go", timeout=600)
    return agent.per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls per round (default 2000)")
    args = parser.parse_args()
    for backend in ("asyncio", "trio"):
        for mode, label in (("baseline", "extension request"), ("plain", "call_tool"),
                            ("notify", "call_tool+notification")):
            rounds = [anyio.run(_round, args.calls, mode, backend=backend) for _ in range(5)]
            print(f"{backend:8} {label:23} {statistics.median(rounds) * 1e6:8.1f} µs per call "
                  f"(median of 5 rounds of {args.calls})")


if __name__ == "__main__":
    main()
