"""The client's MCP servers as pydantic-ai MCP toolsets.

The stdio and HTTP servers of ``session/new`` (or ``session/resume`` / ``session/fork``, which replace
them) become ``MCPToolset``s for each turn: pydantic-ai starts a stdio server with only the environment
the client gave it (plus the MCP SDK's minimal default: never this process's secrets) and this agent's
terminal mark (the watchdog kills it if the agent dies: it never outlives the agent), stops it when the
turn ends, connects an HTTP one with the client's headers, lists their tools and calls them.

A remote client's stdio and HTTP servers never get here unless the operator allowed them
(``HttpOptions.allow_client_mcp``, ``serve --allow-client-mcp``): the runtime refuses them first, since a
stdio entry is a command line the client chooses, run on the server. Each tool is shown as an ACP
tool call like any other. A server's tools are prefixed with its name (``name_tool``) so two servers
cannot clash. Servers the client hosts over ACP (``type: "acp"``) are left to the agent's own code
(``session.acp_mcp_servers``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from pydantic_ai import ModelRetry, Tool
from pydantic_ai.toolsets import FunctionToolset

from ..._util import watch
from ..._util.reaper import MARK_ENV
from ...mcp import AcpMcpServer
from ...schema import McpServerHttp, McpServerStdio
from ...session import Session

__all__ = ["acp_mcp_toolsets", "mcp_toolsets", "stdio_mark"]


def _prefix(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)
    return cleaned or "mcp"


def mcp_toolsets(session: Session, mark: str | None = None) -> list[Any]:
    """One pydantic-ai toolset per stdio or HTTP MCP server of the session (none when there are none); ``mark``:
    the agent's terminal mark, given to stdio servers so its watchdog reaps them (`stdio_mark`)."""
    servers = [s for s in session.mcp_servers if isinstance(s, McpServerStdio | McpServerHttp)]
    if not servers:
        return []
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    toolsets: list[Any] = []
    for server in servers:
        transport: Any
        if isinstance(server, McpServerStdio):
            env = {v.name: v.value for v in server.env}
            if mark is not None:
                env[MARK_ENV] = mark
            transport = StdioTransport(command=server.command, args=list(server.args), env=env, cwd=session.cwd)
        else:
            transport = StreamableHttpTransport(server.url, headers={h.name: h.value for h in server.headers})
        toolsets.append(MCPToolset(transport, id=f"mcp-{_prefix(server.name)}").prefixed(_prefix(server.name)))
    return toolsets


async def stdio_mark(session: Session) -> str | None:
    """The agent's terminal mark when the session has a stdio MCP server (starting the watchdog once)."""
    if not any(isinstance(s, McpServerStdio) for s in session.mcp_servers):
        return None
    return watch.current() or await anyio.to_thread.run_sync(watch.mark)


def _caller(server: AcpMcpServer, name: str) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        result = await server.call_tool(name, arguments)
        if result.is_error:  # the tool's own failure: the model reads it and may try again
            raise ModelRetry(result.text or f"{name} failed")
        return result.text

    return call


async def acp_mcp_toolsets(session: Session) -> list[FunctionToolset[Any]]:
    """[unstable] One toolset per MCP server the client hosts over ACP (``type: "acp"``), tools listed now."""
    toolsets: list[FunctionToolset[Any]] = []
    for name, server in session.acp_mcp_servers.items():
        prefix = _prefix(name)
        tools = [
            Tool.from_schema(_caller(server, tool.name), name=f"{prefix}_{tool.name}",
                             description=tool.description or tool.title,
                             json_schema=tool.input_schema or {"type": "object", "properties": {}})
            for tool in await server.list_tools()
        ]
        toolsets.append(FunctionToolset(tools))
    return toolsets
